package provisioner

import (
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/provisioner/static"
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

// A released static PV with Delete: the backend volume, then the PV.
func TestStaticReclaim(t *testing.T) {
	e := newEnv(t)
	s, err := static.New(static.Options{Client: e.client, Driver: driverNm, Deleter: e.p, Volumes: e.volumes, RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string]()})
	if err != nil {
		t.Fatal(err)
	}
	e.driver.CreateVolume(e.ctx, &csi.CreateVolumeRequest{Name: "static"}) // handle h-static
	pv := staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeBound)
	e.savePV(pv)
	e.refresh()
	if err := s.Reconcile(e.ctx, pv.Name); err != nil {
		t.Fatal(err)
	}
	got, err := e.client.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{})
	if err != nil || !slices.Contains(got.Finalizers, storagehelpers.PVDeletionProtectionFinalizer) {
		t.Fatalf("bound static PV: finalizers %v, err %v", got.Finalizers, err)
	}
	got.Status.Phase = v1.VolumeReleased
	if _, err := e.client.CoreV1().PersistentVolumes().Update(e.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.refresh()
	if err := s.Reconcile(e.ctx, pv.Name); err != nil {
		t.Fatal(err)
	}
	if vols := e.driver.volumes(); len(vols) != 0 {
		t.Errorf("backend volumes left: %v", vols)
	}
	if _, err := e.client.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{}); err == nil {
		t.Error("the PV is still there")
	}
}
