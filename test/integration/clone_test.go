package integration

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	"github.com/tether-csi/tether/test/cluster"
)

const cloneDriverName = "clone.csi.tether.dev"

// slowClones makes every second volume the mock creates answer 3 s after
// it was made: each scenario creates a source (the odd create, at once)
// and then its clone (the even one, slow), so a clone's CreateVolume is
// still running when the test deletes a claim. Only creates of new
// volumes count: a CreateVolume repeated for a volume that exists answers
// before this hook.
const slowClones = `globals: var creates = 0;
createVolumeEnd: |
  creates++;
  if (creates % 2 == 0) {
    var start = new Date().getTime();
    while (new Date().getTime() - start < 3000) {}
  }
  OK;
`

func cloneClaim(name, source string, mode corev1.PersistentVolumeMode) *corev1.PersistentVolumeClaim {
	c := claim(name, "clone", "1Gi")
	c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: source}
	if mode != "" {
		c.Spec.VolumeMode = &mode
	}
	return c
}

func hasCloneProtection(c *corev1.PersistentVolumeClaim) bool {
	return slices.Contains(c.Finalizers, protect.FinalizerCloneSource)
}

// TestClones runs our provisioner, our binder and the csi-test mock driver
// (which has CLONE_VOLUME) on a real control plane with KCM's protection
// controllers, and clones claims.
func TestClones(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	pvcs := cs.CoreV1().PersistentVolumeClaims("default")
	mock := startMock(t, c, cloneDriverName, slowClones)
	startProvisioner(t, c, "clone", mock.Socket)
	startBinder(t, c)
	createCSIClass(t, c, "clone", cloneDriverName, "Delete", storagev1.VolumeBindingImmediate)

	// source creates a claim and waits until it is Bound.
	source := func(t *testing.T, name string) *corev1.PersistentVolumeClaim {
		t.Helper()
		mustCreate(t, pvcs.Create, claim(name, "clone", "1Gi"))
		return waitClaimBound(t, cs, name)
	}
	// copying creates a clone of src and waits until its CreateVolume
	// runs: the clone holds its in-flight record and the source the clone
	// protection (added just before CreateVolume).
	copying := func(t *testing.T, name, src string) {
		t.Helper()
		mustCreate(t, pvcs.Create, cloneClaim(name, src, ""))
		eventually(t, "the copy of "+src+" into "+name+" started", func(ctx context.Context) (bool, error) {
			cl, err := pvcs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			s, err := pvcs.Get(ctx, src, metav1.GetOptions{})
			return err == nil && hasCloneProtection(s) && slices.Contains(cl.Finalizers, provisioner.FinalizerInFlight), nil
		})
	}
	released := func(t *testing.T, name string) {
		t.Helper()
		eventually(t, "clone protection removed from "+name, func(ctx context.Context) (bool, error) {
			s, err := pvcs.Get(ctx, name, metav1.GetOptions{})
			return err == nil && !hasCloneProtection(s), nil
		})
	}
	gone := func(t *testing.T, name string) {
		t.Helper()
		waitGone(t, func(ctx context.Context) error {
			_, err := pvcs.Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}

	t.Run("a clone of a bound claim binds and releases its source", func(t *testing.T) {
		src := source(t, "src1")
		copying(t, "clone1", "src1")
		clone := waitClaimBound(t, cs, "clone1")
		released(t, "src1")
		pv := getPV(t, cs, clone.Spec.VolumeName)
		if pv.Spec.CSI == nil || pv.Spec.CSI.VolumeHandle == getPV(t, cs, src.Spec.VolumeName).Spec.CSI.VolumeHandle {
			t.Errorf("the clone's PV %s has the source's volume", pv.Name)
		}
	})

	t.Run("a Block clone of a Filesystem source is refused", func(t *testing.T) {
		mustCreate(t, pvcs.Create, cloneClaim("block1", "src1", corev1.PersistentVolumeBlock))
		waitEvent(t, cs, "default", "block1", "ProvisioningFailed", "the source is Filesystem, the clone requests Block")
		if got := getClaim(t, cs, "block1"); got.Spec.VolumeName != "" || got.Status.Phase != corev1.ClaimPending {
			t.Errorf("the refused clone is %s with volume %q, want Pending without one", got.Status.Phase, got.Spec.VolumeName)
		}
		if hasCloneProtection(getClaim(t, cs, "src1")) {
			t.Error("a refused clone protected its source")
		}
		deleteClaim(t, cs, "block1")
		gone(t, "block1")
	})

	t.Run("deleting a clone while it copies releases its source", func(t *testing.T) {
		source(t, "src2")
		copying(t, "clone2", "src2")
		deleteClaim(t, cs, "clone2")
		// The copy runs on: the source stays protected meanwhile.
		if !hasCloneProtection(getClaim(t, cs, "src2")) {
			t.Error("the source lost its protection while the deleted clone's CreateVolume ran")
		}
		gone(t, "clone2")
		released(t, "src2")
	})

	t.Run("a source deleted while a clone copies it waits for the clone", func(t *testing.T) {
		source(t, "src3")
		copying(t, "clone3", "src3")
		deleteClaim(t, cs, "src3")
		s := getClaim(t, cs, "src3")
		if s.DeletionTimestamp == nil || !hasCloneProtection(s) {
			t.Fatalf("source after its deletion: deletionTimestamp %v, finalizers %v; want Terminating and protected",
				s.DeletionTimestamp, s.Finalizers)
		}
		waitClaimBound(t, cs, "clone3")
		gone(t, "src3")
		if got := getClaim(t, cs, "clone3"); got.Status.Phase != corev1.ClaimBound {
			t.Errorf("the clone is %s after its source went", got.Status.Phase)
		}
	})

	t.Run("a source deleted first, then its copying clone: both go", func(t *testing.T) {
		source(t, "src4")
		copying(t, "clone4", "src4")
		deleteClaim(t, cs, "src4")
		deleteClaim(t, cs, "clone4")
		gone(t, "clone4")
		gone(t, "src4")
	})

	t.Run("no volume is left without a PV", func(t *testing.T) {
		eventually(t, "every driver volume has a PV", func(ctx context.Context) (bool, error) {
			pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			var handles []string
			for _, pv := range pvs.Items {
				if pv.Spec.CSI != nil {
					handles = append(handles, pv.Spec.CSI.VolumeHandle)
				}
			}
			for _, id := range mock.Volumes(t) {
				if !slices.Contains(handles, id) {
					return false, nil
				}
			}
			return true, nil
		})
		for _, name := range []string{"src1", "clone1", "clone3"} {
			if _, err := pvcs.Get(t.Context(), name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				t.Errorf("claim %s is gone", name)
			}
		}
	})
}
