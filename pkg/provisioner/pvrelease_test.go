package provisioner

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

const pvProtection = "kubernetes.io/pv-protection"

// After a successful DeleteVolume the library deletes the PV and removes
// its finalizer from its cached copy, older than the deletion; meanwhile
// kube-controller-manager's pv-protection writes the PV too. The removal
// goes through, retried on a fresh read, with no second DeleteVolume; a PV
// whose volume this process did not delete keeps the conflict.
func TestDeletedVolumeReleasedDespiteConflicts(t *testing.T) {
	fin := storagehelpers.PVDeletionProtectionFinalizer
	for _, tc := range []struct {
		name         string
		deleteHere   bool
		wantConflict bool
	}{
		{name: "deleted here", deleteHere: true},
		{name: "not deleted here", wantConflict: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pv := deletePV(nil)
			pv.UID, pv.ResourceVersion, pv.Finalizers = "pv-uid", "1", []string{fin, pvProtection}
			pv.Status.Phase = v1.VolumeReleased
			e.savePV(pv)
			if tc.deleteHere {
				if err := e.p.Delete(e.ctx, pv); err != nil {
					t.Fatal(err)
				}
			}
			tracker := e.client.Tracker()
			pvs := v1.SchemeGroupVersion.WithResource("persistentvolumes")
			// The library's DeleteOptions: the server sets the deletion
			// timestamp (a new version).
			deleting := pv.DeepCopy()
			now := metav1.NewTime(e.clock)
			deleting.DeletionTimestamp, deleting.ResourceVersion = &now, "2"
			if err := tracker.Update(pvs, deleting, ""); err != nil {
				t.Fatal(err)
			}
			// pv-protection removes its finalizer just before our first
			// patch lands.
			patches := 0
			e.client.PrependReactor("patch", "persistentvolumes", func(clienttesting.Action) (bool, runtime.Object, error) {
				patches++
				if patches == 1 {
					protected := deleting.DeepCopy()
					protected.Finalizers, protected.ResourceVersion = []string{fin}, "3"
					if err := tracker.Update(pvs, protected, ""); err != nil {
						t.Fatal(err)
					}
					return true, nil, apierrors.NewConflict(v1.Resource("persistentvolumes"), pv.Name, nil)
				}
				return false, nil, nil
			})
			stale := pv.DeepCopy()
			stale.Finalizers = []string{pvProtection}
			_, err := e.p.LibraryClient(e.client).CoreV1().PersistentVolumes().Update(e.ctx, stale, metav1.UpdateOptions{})
			if tc.wantConflict {
				if !apierrors.IsConflict(err) || patches != 0 {
					t.Errorf("err %v after %d patches, want a conflict and no patch", err, patches)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.client.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(got.Finalizers, fin) || patches != 2 {
				t.Errorf("finalizers %v after %d patches, want the deletion finalizer off after 2", got.Finalizers, patches)
			}
			if len(e.driver.deletes) != 1 {
				t.Errorf("%d DeleteVolume calls, want 1", len(e.driver.deletes))
			}
			if e.p.deleted.has(pv.UID) {
				t.Error("the deleted volume is still remembered after its release")
			}
		})
	}
}
