package provisioner

import (
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// staticPV is a statically made CSI PV of the test driver.
func staticPV(policy v1.PersistentVolumeReclaimPolicy, phase v1.PersistentVolumePhase, finalizers ...string) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "static-1", UID: "pv-uid", Finalizers: finalizers},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy,
			ClaimRef:               &v1.ObjectReference{Namespace: testNS, Name: testClaim, UID: testUID},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driverNm, VolumeHandle: "h-static"}}},
		Status: v1.PersistentVolumeStatus{Phase: phase},
	}
}

func TestDecideStatic(t *testing.T) {
	del, keep := v1.PersistentVolumeReclaimDelete, v1.PersistentVolumeReclaimRetain
	deleting := func(pv *v1.PersistentVolume) *v1.PersistentVolume {
		now := metav1.Now()
		pv.DeletionTimestamp = &now
		return pv
	}
	provisioned := func(pv *v1.PersistentVolume) *v1.PersistentVolume {
		metav1.SetMetaDataAnnotation(&pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned, driverNm)
		return pv
	}
	otherDriver := staticPV(del, v1.VolumeReleased)
	otherDriver.Spec.CSI.Driver = "other.csi"
	tests := []struct {
		name string
		pv   *v1.PersistentVolume
		want staticOp
	}{
		{"bound with Delete: the finalizer goes on", staticPV(del, v1.VolumeBound), staticAddFinalizer},
		{"bound with Delete and the finalizer", staticPV(del, v1.VolumeBound, FinalizerVolume), staticNone},
		{"available with Delete: nothing yet", staticPV(del, v1.VolumeAvailable), staticNone},
		{"released with Delete: delete the backend volume", staticPV(del, v1.VolumeReleased, FinalizerVolume), staticDelete},
		{"released with Delete, no finalizer (bound before the switch)", staticPV(del, v1.VolumeReleased), staticDelete},
		{"released, being deleted, finalizer gone: done", deleting(staticPV(del, v1.VolumeReleased)), staticNone},
		{"released, being deleted, finalizer still there (a crash mid-way)", deleting(staticPV(del, v1.VolumeReleased, FinalizerVolume)), staticDelete},
		{"bound with Retain and our finalizer (policy changed): the finalizer goes", staticPV(keep, v1.VolumeBound, FinalizerVolume), staticRemoveFinalizer},
		{"released with Retain: kept", staticPV(keep, v1.VolumeReleased), staticNone},
		{"a provisioned PV is the library's", provisioned(staticPV(del, v1.VolumeReleased)), staticNone},
		{"another driver's PV", otherDriver, staticNone},
	}
	for _, tt := range tests {
		if got := decideStatic(tt.pv, driverNm); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}

// A released static PV with Delete: the backend volume, then the PV.
func TestStaticReclaim(t *testing.T) {
	e := newEnv(t)
	s, err := e.p.NewStatic(StaticOptions{Volumes: e.volumes, RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string]()})
	if err != nil {
		t.Fatal(err)
	}
	e.driver.CreateVolume(e.ctx, &csi.CreateVolumeRequest{Name: "static"}) // handle h-static
	pv := staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeBound)
	e.savePV(pv)
	e.refresh()
	if err := s.sync(e.ctx, pv.Name); err != nil {
		t.Fatal(err)
	}
	got, err := e.client.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{})
	if err != nil || !slices.Contains(got.Finalizers, FinalizerVolume) {
		t.Fatalf("bound static PV: finalizers %v, err %v", got.Finalizers, err)
	}
	got.Status.Phase = v1.VolumeReleased
	if _, err := e.client.CoreV1().PersistentVolumes().Update(e.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.refresh()
	if err := s.sync(e.ctx, pv.Name); err != nil {
		t.Fatal(err)
	}
	if vols := e.driver.volumes(); len(vols) != 0 {
		t.Errorf("backend volumes left: %v", vols)
	}
	if _, err := e.client.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{}); err == nil {
		t.Error("the PV is still there")
	}
}
