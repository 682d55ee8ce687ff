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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tcsi "github.com/tether-csi/tether/pkg/csi"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	"github.com/tether-csi/tether/test/cluster"
)

// TestOrphanSweep makes volumes behind the provisioner's back, all with our
// name prefix and no PV: one without a mark (another cluster's, say:
// reported only), one marked for a Retain class (a disk an admin keeps:
// reported only), one with another name (never touched); and, once the
// sweep has listed the backend twice, one with this cluster's ownership
// mark for a Delete class (an orphan made while the sweep watched:
// reported, then deleted under --orphan-policy=delete). A provisioned
// volume with its PV is never touched, and carries the mark. Nor is the
// disk of a Delete class that an admin kept (issue 24, defect 2): its PV
// patched to Retain, its claim deleted, the PV deleted; its mark still
// says Delete.
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
	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("keep-disk", "sweep", "1Gi"))
	legit := getPV(t, cs, waitClaimBound(t, cs, "kept").Spec.VolumeName).Spec.CSI.VolumeHandle
	keptPV := getPV(t, cs, waitClaimBound(t, cs, "keep-disk").Spec.VolumeName)
	keptDisk := keptPV.Spec.CSI.VolumeHandle

	// The cluster's ID in the mark is the UID of kube-system.
	ks, err := cs.CoreV1().Namespaces().Get(t.Context(), metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours := request.OwnerMark(string(ks.UID), corev1.PersistentVolumeReclaimDelete)

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	conn, err := tcsi.Connect(ctx, tcsi.Options{Address: socket})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if mark := volumeContexts(t, conn)[keptDisk][request.OwnerKey]; mark != ours {
		t.Errorf("the provisioned volume's mark is %q, want %q", mark, ours)
	}
	create := func(name, mark string) {
		t.Helper()
		req := &csi.CreateVolumeRequest{Name: name,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20},
			VolumeCapabilities: []*csi.VolumeCapability{{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}}}}
		if mark != "" {
			req.Parameters = map[string]string{request.OwnerKey: mark}
		}
		if _, err := conn.CreateVolume(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	unmarked, retained := "pvc-"+uuid.NewString(), "pvc-"+uuid.NewString()
	create(unmarked, "")
	create("hand-made", ours)
	create(retained, request.OwnerMark(string(ks.UID), corev1.PersistentVolumeReclaimRetain))

	// The admin keeps keep-disk's disk: Retain, the claim goes, the
	// Released PV is deleted.
	keptPV.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	if _, err := cs.CoreV1().PersistentVolumes().Update(t.Context(), keptPV, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().PersistentVolumeClaims("default").Delete(t.Context(), "keep-disk", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PV "+keptPV.Name+" Released", func(ctx context.Context) (bool, error) {
		return getPV(t, cs, keptPV.Name).Status.Phase == corev1.VolumeReleased, nil
	})
	if err := cs.CoreV1().PersistentVolumes().Delete(t.Context(), keptPV.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PV "+keptPV.Name+" gone", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, keptPV.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	for name, why := range map[string]string{unmarked: "not provably ours", retained: "retains its volumes",
		keptDisk: "a PV named it with a reclaim policy other than Delete"} {
		e := waitEvent(t, cs, "default", localDriver, "OrphanVolume", name, why)
		t.Logf("reported: %s", e.Message)
	}
	// unmarked was reported: the sweep has listed the backend at least
	// twice, so a volume made now was made while it watched. It goes;
	// by then the kept disk, orphaned earlier, has been a candidate for
	// longer and on more sweeps than it.
	orphan := "pvc-" + uuid.NewString()
	create(orphan, ours)
	waitEvent(t, cs, "default", localDriver, "OrphanVolume", "deleted orphan backend volume "+orphan)
	left := listVolumes(t, conn)
	if slices.Contains(left, orphan) {
		t.Errorf("the orphan %s is still there: %v", orphan, left)
	}
	for _, kept := range []string{legit, "hand-made", unmarked, retained, keptDisk} {
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
