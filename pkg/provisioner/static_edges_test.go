package provisioner

import (
	"slices"
	"testing"

	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/provisioner/static"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
)

// A released static PV with Delete whose deletion its finalizer holds (as
// the API server does): once the backend volume is gone, the reclaimer
// drops the finalizer of that same PV, so that the PV goes.
func TestStaticReclaimDropsTheFinalizerThatHoldsThePV(t *testing.T) {
	e := newEnv(t)
	s, err := static.New(static.Options{Client: e.client, Driver: driverNm, Deleter: e.p, Volumes: e.volumes, RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string]()})
	if err != nil {
		t.Fatal(err)
	}
	e.driver.CreateVolume(e.ctx, &csi.CreateVolumeRequest{Name: "static"}) // handle h-static
	pv := staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeReleased, storagehelpers.PVDeletionProtectionFinalizer)
	e.savePV(pv)
	tracker := e.client.Tracker()
	pvs := v1.SchemeGroupVersion.WithResource("persistentvolumes")
	e.client.PrependReactor("delete", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := tracker.Get(pvs, "", a.(k8stesting.DeleteAction).GetName())
		if err != nil {
			return true, nil, err
		}
		held := obj.(*v1.PersistentVolume).DeepCopy()
		now := metav1.Now()
		held.DeletionTimestamp = &now
		return true, nil, tracker.Update(pvs, held, "")
	})
	e.refresh()
	if err := s.Reconcile(e.ctx, pv.Name); err != nil {
		t.Fatal(err)
	}
	if vols := e.driver.volumes(); len(vols) != 0 {
		t.Errorf("backend volumes left: %v", vols)
	}
	got, err := e.client.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.DeletionTimestamp == nil || slices.Contains(got.Finalizers, storagehelpers.PVDeletionProtectionFinalizer) {
		t.Errorf("the PV: deleting %v, finalizers %v; want it deleting without %s", got.DeletionTimestamp != nil, got.Finalizers, storagehelpers.PVDeletionProtectionFinalizer)
	}
}

// When the PV of that name is already another PV (the old one went and an
// admin made a new one), the reclaimer leaves the new one's finalizer.
func TestStaticReclaimLeavesANewPVOfTheSameName(t *testing.T) {
	e := newEnv(t)
	s, err := static.New(static.Options{Client: e.client, Driver: driverNm, Deleter: e.p, Volumes: e.volumes, RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string]()})
	if err != nil {
		t.Fatal(err)
	}
	e.driver.CreateVolume(e.ctx, &csi.CreateVolumeRequest{Name: "static"}) // handle h-static
	pv := staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeReleased, storagehelpers.PVDeletionProtectionFinalizer)
	e.savePV(pv)
	tracker := e.client.Tracker()
	pvs := v1.SchemeGroupVersion.WithResource("persistentvolumes")
	e.client.PrependReactor("delete", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		renewed := staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeBound, storagehelpers.PVDeletionProtectionFinalizer)
		renewed.UID = "pv-uid-2"
		return true, nil, tracker.Update(pvs, renewed, "")
	})
	e.refresh()
	if err := s.Reconcile(e.ctx, pv.Name); err != nil {
		t.Fatal(err)
	}
	got, err := e.client.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != "pv-uid-2" || !slices.Contains(got.Finalizers, storagehelpers.PVDeletionProtectionFinalizer) {
		t.Errorf("the new PV: UID %s, finalizers %v; want pv-uid-2 keeping %s", got.UID, got.Finalizers, storagehelpers.PVDeletionProtectionFinalizer)
	}
}

// TestAnswersErrsWhileItsNodeIsUnknown: in node-deployment mode the static
// reclaimer is told "not known yet", not "another node's", while this node
// is not in the node cache (issue 49).
func TestAnswersErrsWhileItsNodeIsUnknown(t *testing.T) {
	e := newEnv(t, nodeMode("node-1"))
	pv := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{
		CSI: &v1.CSIPersistentVolumeSource{Driver: driverNm, VolumeHandle: "h"}}}}
	if ours, err := e.p.Answers(e.ctx, pv); err == nil {
		t.Fatalf("Answers = %v with this node unknown; want an error", ours)
	}
	e.createNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	if ours, err := e.p.Answers(e.ctx, pv); err != nil || ours {
		t.Fatalf("Answers = %v, %v for a PV without affinity once the node is known; want false, nil", ours, err)
	}
}
