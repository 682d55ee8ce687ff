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
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tcsi "github.com/tether-csi/tether/pkg/csi"
	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/test/cluster"
)

// TestOrphanSweep makes volumes behind the provisioner's back, all with our
// name prefix and no PV: one with this cluster's ownership mark for a
// Delete class (an orphan of ours: reported, then deleted under
// --orphan-policy=delete), one without a mark (another cluster's, say:
// reported only), one marked for a Retain class (a disk an admin keeps:
// reported only); and one with another name (never touched). A provisioned
// volume with its PV is never touched either, and carries the mark.
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

	// The cluster's ID in the mark is the UID of kube-system.
	ks, err := cs.CoreV1().Namespaces().Get(t.Context(), metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours := provisioner.OwnerMark(string(ks.UID), corev1.PersistentVolumeReclaimDelete)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := tcsi.Connect(ctx, tcsi.Options{Address: socket})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if mark := volumeContexts(t, conn)[legit][provisioner.OwnerKey]; mark != ours {
		t.Errorf("the provisioned volume's mark is %q, want %q", mark, ours)
	}
	orphan, unmarked, retained := "pvc-"+uuid.NewString(), "pvc-"+uuid.NewString(), "pvc-"+uuid.NewString()
	for name, mark := range map[string]string{orphan: ours, unmarked: "", "hand-made": ours,
		retained: provisioner.OwnerMark(string(ks.UID), corev1.PersistentVolumeReclaimRetain)} {
		req := &csi.CreateVolumeRequest{Name: name,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20},
			VolumeCapabilities: []*csi.VolumeCapability{{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}}}}
		if mark != "" {
			req.Parameters = map[string]string{provisioner.OwnerKey: mark}
		}
		if _, err := conn.CreateVolume(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{orphan, unmarked, retained} {
		e := waitEvent(t, cs, "default", localDriver, "OrphanVolume", name)
		t.Logf("reported: %s", e.Message)
	}
	eventually(t, "orphan deleted", func(ctx context.Context) (bool, error) {
		return !slices.Contains(listVolumes(t, conn), orphan), nil
	})
	left := listVolumes(t, conn)
	for _, kept := range []string{legit, "hand-made", unmarked, retained} {
		if !slices.Contains(left, kept) {
			t.Errorf("the sweep deleted %s: left %v", kept, left)
		}
	}
}

// volumeContexts is every volume's context by ID.
func volumeContexts(t *testing.T, conn *tcsi.Conn) map[string]map[string]string {
	t.Helper()
	resp, err := conn.ListVolumes(t.Context(), &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, e := range resp.Entries {
		out[e.GetVolume().GetVolumeId()] = e.GetVolume().GetVolumeContext()
	}
	return out
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
