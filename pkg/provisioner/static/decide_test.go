package static

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

const (
	testNS    = "apps"
	testClaim = "data"
	testUID   = "4f9d1c2e-6a1b-4c8d-9e0f-112233445566"
	driverNm  = "csi.tether.dev"
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
		want Op
	}{
		{"bound with Delete: the finalizer goes on", staticPV(del, v1.VolumeBound), AddFinalizer},
		{"bound with Delete and the finalizer", staticPV(del, v1.VolumeBound, finalizer), None},
		{"available with Delete: nothing yet", staticPV(del, v1.VolumeAvailable), None},
		{"released with Delete: delete the backend volume", staticPV(del, v1.VolumeReleased, finalizer), Delete},
		{"released with Delete, no finalizer (bound before the switch)", staticPV(del, v1.VolumeReleased), Delete},
		{"released, being deleted, finalizer gone: done", deleting(staticPV(del, v1.VolumeReleased)), None},
		{"released, being deleted, finalizer still there (a crash mid-way)", deleting(staticPV(del, v1.VolumeReleased, finalizer)), Delete},
		{"bound with Retain and our finalizer (policy changed): the finalizer goes", staticPV(keep, v1.VolumeBound, finalizer), RemoveFinalizer},
		{"released with Retain: kept", staticPV(keep, v1.VolumeReleased), None},
		{"a provisioned PV is the library's", provisioned(staticPV(del, v1.VolumeReleased)), None},
		{"another driver's PV", otherDriver, None},
	}
	for _, tt := range tests {
		if got := Decide(tt.pv, driverNm); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}
