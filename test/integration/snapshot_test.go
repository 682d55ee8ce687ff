package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	"github.com/tether-csi/tether/test/cluster"
)

const snapDriverName = "snap.csi.tether.dev"

// slowCreates makes every new volume the mock creates answer 3 s after it
// was made, so that a restore is still running when a test deletes its
// claim or its snapshot. A CreateVolume repeated for a volume that exists
// answers before this hook.
const slowCreates = `createVolumeEnd: |
  var start = new Date().getTime();
  while (new Date().getTime() - start < 3000) {}
  OK;
`

// snapshotsOf is the VolumeSnapshot API of the cluster.
func snapshotsOf(t *testing.T, c *cluster.Cluster) snapclientset.Interface {
	t.Helper()
	sc, err := snapclientset.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func createSnapshotClass(t *testing.T, sc snapclientset.Interface, name, driver string) {
	t.Helper()
	mustCreate(t, sc.SnapshotV1().VolumeSnapshotClasses().Create, &snapv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver, DeletionPolicy: snapv1.VolumeSnapshotContentDelete})
}

// takeSnapshot snapshots a claim and waits until the snapshot is ready.
func takeSnapshot(t *testing.T, sc snapclientset.Interface, name, class, claimName string) *snapv1.VolumeSnapshot {
	t.Helper()
	mustCreate(t, sc.SnapshotV1().VolumeSnapshots("default").Create, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: snapv1.VolumeSnapshotSpec{VolumeSnapshotClassName: &class,
			Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claimName}},
	})
	var snap *snapv1.VolumeSnapshot
	eventually(t, "snapshot "+name+" ready", func(ctx context.Context) (bool, error) {
		s, err := sc.SnapshotV1().VolumeSnapshots("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		snap = s
		return s.Status != nil && ptr.Deref(s.Status.ReadyToUse, false) && s.Status.BoundVolumeSnapshotContentName != nil, nil
	})
	return snap
}

func restoreClaim(name, class, snapshot, size string, mode corev1.PersistentVolumeMode) *corev1.PersistentVolumeClaim {
	c := claim(name, class, size)
	c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: snapshot}
	if mode != "" {
		c.Spec.VolumeMode = &mode
	}
	return c
}

func snapshotProtected(s *snapv1.VolumeSnapshot) bool {
	return slices.Contains(s.Finalizers, protect.FinalizerSnapshotSource)
}

// waitRestoring waits until a restore's CreateVolume runs: the claim holds
// its in-flight record and the snapshot the restore protection.
func waitRestoring(t *testing.T, c *cluster.Cluster, sc snapclientset.Interface, claimName, snapName string) {
	t.Helper()
	eventually(t, "the restore of "+snapName+" into "+claimName+" started", func(ctx context.Context) (bool, error) {
		cl, err := c.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s, err := sc.SnapshotV1().VolumeSnapshots("default").Get(ctx, snapName, metav1.GetOptions{})
		return err == nil && snapshotProtected(s) && slices.Contains(cl.Finalizers, provisioner.FinalizerInFlight), nil
	})
}

// waitReleased waits until a snapshot no longer carries the restore
// protection (or is gone).
func waitReleased(t *testing.T, sc snapclientset.Interface, name string) {
	t.Helper()
	eventually(t, "snapshot "+name+" released", func(ctx context.Context) (bool, error) {
		s, err := sc.SnapshotV1().VolumeSnapshots("default").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && !snapshotProtected(s), nil
	})
}

// TestRestores runs the snapshot-controller, the csi-snapshotter sidecar,
// our provisioner and binder and the csi-test mock driver (which has
// CREATE_DELETE_SNAPSHOT) on a real control plane, and restores claims
// from VolumeSnapshots.
func TestRestores(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	c.StartSnapshotController(t)
	cs, sc := c.Client, snapshotsOf(t, c)
	pvcs := cs.CoreV1().PersistentVolumeClaims("default")
	mock := startMock(t, c, snapDriverName, slowCreates)
	c.StartSnapshotter(t, "mock", mock.Socket)
	startProvisioner(t, c, "snap", mock.Socket)
	startBinder(t, c)
	createCSIClass(t, c, "snap", snapDriverName, "Delete", storagev1.VolumeBindingImmediate)
	createSnapshotClass(t, sc, "snap", snapDriverName)

	mustCreate(t, pvcs.Create, claim("orig", "snap", "1Gi"))
	waitClaimBound(t, cs, "orig")
	takeSnapshot(t, sc, "snap-1", "snap", "orig")

	t.Run("a claim restored from a ready snapshot binds; the snapshot is released after the bind", func(t *testing.T) {
		mustCreate(t, pvcs.Create, restoreClaim("restored", "snap", "snap-1", "2Gi", ""))
		waitRestoring(t, c, sc, "restored", "snap-1")
		pvc := waitClaimBound(t, cs, "restored")
		pv := getPV(t, cs, pvc.Spec.VolumeName)
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != snapDriverName {
			t.Errorf("PV %s: %+v", pv.Name, pv.Spec.PersistentVolumeSource)
		}
		waitReleased(t, sc, "snap-1")
	})

	t.Run("a snapshot deleted while a restore from it runs: the restore finishes, then the snapshot and its content go", func(t *testing.T) {
		snap := takeSnapshot(t, sc, "snap-2", "snap", "orig")
		mustCreate(t, pvcs.Create, restoreClaim("during-delete", "snap", "snap-2", "1Gi", ""))
		waitRestoring(t, c, sc, "during-delete", "snap-2")
		if err := sc.SnapshotV1().VolumeSnapshots("default").Delete(t.Context(), "snap-2", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if s, err := sc.SnapshotV1().VolumeSnapshots("default").Get(t.Context(), "snap-2", metav1.GetOptions{}); err != nil || s.DeletionTimestamp == nil {
			t.Fatalf("the snapshot under restore: %v %v, want it held while being deleted", s, err)
		}
		waitClaimBound(t, cs, "during-delete")
		waitGone(t, func(ctx context.Context) error {
			_, err := sc.SnapshotV1().VolumeSnapshots("default").Get(ctx, "snap-2", metav1.GetOptions{})
			return err
		})
		waitGone(t, func(ctx context.Context) error {
			_, err := sc.SnapshotV1().VolumeSnapshotContents().Get(ctx, *snap.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
			return err
		})
	})

	t.Run("a claim deleted while its restore runs: its volume is deleted, then the snapshot is released", func(t *testing.T) {
		pvc := mustCreate(t, pvcs.Create, restoreClaim("abandoned", "snap", "snap-1", "1Gi", ""))
		waitRestoring(t, c, sc, "abandoned", "snap-1")
		deleteClaim(t, cs, "abandoned")
		waitGone(t, func(ctx context.Context) error {
			_, err := pvcs.Get(ctx, "abandoned", metav1.GetOptions{})
			return err
		})
		// Deleted by the clean-up, or through its PV when the library saved
		// one before the claim went.
		eventually(t, "the abandoned restore's volume deleted", func(ctx context.Context) (bool, error) {
			vols, err := cluster.DriverVolumes(ctx, mock.Socket)
			if err != nil {
				return false, err
			}
			return !slices.ContainsFunc(vols, func(v *csi.Volume) bool { return v.GetVolumeContext()["name"] == "pvc-"+string(pvc.UID) }), nil
		})
		waitReleased(t, sc, "snap-1")
	})

	t.Run("Block from a Filesystem snapshot: refused until its content allows the change", func(t *testing.T) {
		mustCreate(t, pvcs.Create, restoreClaim("block", "snap", "snap-1", "1Gi", corev1.PersistentVolumeBlock))
		waitEvent(t, cs, "default", "block", "ProvisioningFailed", request.AnnAllowVolumeModeChange)
		if pvc := getClaim(t, cs, "block"); pvc.Spec.VolumeName != "" {
			t.Fatalf("the Block claim got %s", pvc.Spec.VolumeName)
		}
		s, err := sc.SnapshotV1().VolumeSnapshots("default").Get(t.Context(), "snap-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		contents := sc.SnapshotV1().VolumeSnapshotContents()
		content, err := contents.Get(t.Context(), *s.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		metav1.SetMetaDataAnnotation(&content.ObjectMeta, request.AnnAllowVolumeModeChange, "true")
		if _, err := contents.Update(t.Context(), content, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitClaimBound(t, cs, "block")
	})

	t.Run("a data source of another kind is left to a populator, without events", func(t *testing.T) {
		pvc := claim("populated", "snap", "1Gi")
		pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("hello.example.com"), Kind: "Hello", Name: "x"}
		mustCreate(t, pvcs.Create, pvc)
		// A claim made after it is provisioned: the populator's was seen.
		mustCreate(t, pvcs.Create, claim("after-populated", "snap", "1Gi"))
		waitClaimBound(t, cs, "after-populated")
		evs, err := cs.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=populated"})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == "ProvisioningFailed" {
				t.Errorf("the populator's claim got %s: %s", e.Reason, e.Message)
			}
		}
		if pvc := getClaim(t, cs, "populated"); pvc.Spec.VolumeName != "" || slices.Contains(pvc.Finalizers, provisioner.FinalizerInFlight) {
			t.Errorf("the populator's claim was provisioned: %+v", pvc)
		}
	})
}

// TestLocalRestore: the example local driver on one fake node, with the
// snapshot-controller and the csi-snapshotter next to the driver. Data
// written into a volume is in a claim restored from its snapshot, and
// changes made after the snapshot are not.
func TestLocalRestore(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	c.StartSnapshotController(t)
	stack := cluster.StartLocalStack(t, c, cluster.StackOptions{Nodes: 1})
	node := stack.Nodes[0]
	c.StartSnapshotter(t, "local", node.Socket)
	cs, sc := c.Client, snapshotsOf(t, c)
	pvcs := cs.CoreV1().PersistentVolumeClaims("default")
	createCSIClass(t, c, "local-now", localDriver, "Delete", storagev1.VolumeBindingImmediate)
	createSnapshotClass(t, sc, "local", localDriver)

	mustCreate(t, pvcs.Create, claim("orig", "local-now", "1Gi"))
	pv := getPV(t, cs, waitClaimBound(t, cs, "orig").Spec.VolumeName)
	file := func(pv *corev1.PersistentVolume) string {
		return filepath.Join(node.Root, "volumes", pv.Spec.CSI.VolumeHandle, "data.txt")
	}
	if err := os.WriteFile(file(pv), []byte("written before the snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	takeSnapshot(t, sc, "local-snap", "local", "orig")
	if err := os.WriteFile(file(pv), []byte("written after the snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}

	mustCreate(t, pvcs.Create, restoreClaim("restored", "local-now", "local-snap", "1Gi", ""))
	restored := getPV(t, cs, waitClaimBound(t, cs, "restored").Spec.VolumeName)
	got, err := os.ReadFile(file(restored))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "written before the snapshot" {
		t.Errorf("the restored volume holds %q", got)
	}
	waitReleased(t, sc, "local-snap")

	// The local driver's snapshots have a restore size (the volume's). (A
	// claim placed on the node, as the scheduler would: node-deployment
	// provisioners only log why they pass over an Immediate claim.)
	createCSIClass(t, c, "local-later", localDriver, "Delete", storagev1.VolumeBindingWaitForFirstConsumer)
	small := restoreClaim("small", "local-later", "local-snap", "512Mi", "")
	small.Annotations = map[string]string{"volume.kubernetes.io/selected-node": node.Name}
	mustCreate(t, pvcs.Create, small)
	waitEvent(t, cs, "default", "small", "ProvisioningFailed", "less than the restore size 1Gi")

	// Deleting the snapshot deletes its copy on the node (once no Pending
	// claim names it: the snapshot-controller waits for those).
	deleteClaim(t, cs, "small")
	if err := sc.SnapshotV1().VolumeSnapshots("default").Delete(t.Context(), "local-snap", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the snapshot's copy removed from the node", func(context.Context) (bool, error) {
		entries, err := os.ReadDir(filepath.Join(node.Root, "snapshots"))
		return err == nil && len(entries) == 0, nil
	})
}

// TestInteropUpstreamProvisionerRestoresWithOurBinder: external-provisioner
// v6.4.0 restores a claim from a VolumeSnapshot and our binder binds it, as
// with tether's provisioner.
func TestInteropUpstreamProvisionerRestoresWithOurBinder(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	c.StartSnapshotController(t)
	cs, sc := c.Client, snapshotsOf(t, c)
	pvcs := cs.CoreV1().PersistentVolumeClaims("default")
	mock := startMock(t, c, snapDriverName, "")
	c.StartSnapshotter(t, "mock", mock.Socket)
	ep, err := cluster.Tool("csi-provisioner")
	if err != nil {
		t.Fatal(err)
	}
	c.Run(t, cluster.ProcessOptions{Name: "external-provisioner", Path: ep,
		Args: []string{"--kubeconfig=" + c.Kubeconfig, "--csi-address=" + mock.Socket, "--leader-election=false", "-v=3"}})
	startBinder(t, c)
	createCSIClass(t, c, "snap", snapDriverName, "Delete", storagev1.VolumeBindingImmediate)
	createSnapshotClass(t, sc, "snap", snapDriverName)

	mustCreate(t, pvcs.Create, claim("orig", "snap", "1Gi"))
	waitClaimBound(t, cs, "orig")
	takeSnapshot(t, sc, "snap-1", "snap", "orig")
	mustCreate(t, pvcs.Create, restoreClaim("restored", "snap", "snap-1", "1Gi", ""))
	pvc := waitClaimBound(t, cs, "restored")
	if pv := getPV(t, cs, pvc.Spec.VolumeName); pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		t.Errorf("PV %s claimRef %+v", pv.Name, pv.Spec.ClaimRef)
	}
	waitReleased(t, sc, "snap-1")
	mustCreate(t, pvcs.Create, restoreClaim("block", "snap", "snap-1", "1Gi", corev1.PersistentVolumeBlock))
	waitEvent(t, cs, "default", "block", "ProvisioningFailed", request.AnnAllowVolumeModeChange)
}
