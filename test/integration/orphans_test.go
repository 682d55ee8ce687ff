package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/uuid"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tcsi "github.com/tether-csi/tether/pkg/csi"
	"github.com/tether-csi/tether/test/cluster"
)

// TestOrphanSweep makes volumes behind the provisioner's back: one with our
// name prefix (an orphan: reported, then deleted under --orphan-policy=delete)
// and one with another name (never touched); a provisioned volume with its
// PV is never touched either.
func TestOrphanSweep(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	yes, no := true, false
	mustCreate(t, cs.StorageV1().CSIDrivers().Create, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: localDriver},
		Spec: storagev1.CSIDriverSpec{StorageCapacity: &no, AttachRequired: &no, PodInfoOnMount: &yes}})
	dir, err := os.MkdirTemp("", "orphan")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "csi.sock")
	c.Run(t, cluster.ProcessOptions{Name: "driver", Path: cluster.BuildBinary(t, "./examples/local-driver"),
		Args: []string{"--endpoint=" + socket, "--node-id=node-1", "--root=" + filepath.Join(dir, "root"), "--capacity=10Gi"}})
	startProvisioner(t, c, "local", socket, "--orphan-policy=delete", "--orphan-sweep-interval=500ms", "--orphan-min-age=1s")
	startBinder(t, c)
	createCSIClass(t, c, "sweep", localDriver, "Delete", storagev1.VolumeBindingImmediate)
	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("kept", "sweep", "1Gi"))
	legit := getPV(t, cs, waitClaimBound(t, cs, "kept").Spec.VolumeName).Spec.CSI.VolumeHandle

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := tcsi.Connect(ctx, tcsi.Options{Address: socket})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	orphan := "pvc-" + uuid.NewString()
	for _, name := range []string{orphan, "hand-made"} {
		if _, err := conn.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20},
			VolumeCapabilities: []*csi.VolumeCapability{{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	e := waitEvent(t, cs, "default", localDriver, "OrphanVolume", orphan)
	t.Logf("reported: %s", e.Message)
	eventually(t, "orphan deleted", func(ctx context.Context) (bool, error) {
		return !slices.Contains(listVolumes(t, conn), orphan), nil
	})
	left := listVolumes(t, conn)
	if !slices.Contains(left, legit) || !slices.Contains(left, "hand-made") {
		t.Errorf("the sweep deleted more than the orphan: left %v", left)
	}
}

func listVolumes(t *testing.T, conn *tcsi.Conn) []string {
	t.Helper()
	resp, err := conn.ListVolumes(t.Context(), &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range resp.Entries {
		ids = append(ids, e.GetVolume().GetVolumeId())
	}
	return ids
}
