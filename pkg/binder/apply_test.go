package binder

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/inflight"
)

// The bind write drops the provisioner's in-flight record when the claim
// is bound to the PV the record names, and only then.
func TestBindSettlesInFlightRecord(t *testing.T) {
	tests := []struct {
		name       string
		pvName     string
		driver     string
		wantRecord bool
	}{
		{"the PV the record names", "pvc-uid-1", "csi.tether.dev", false},
		// Defect 3 of issue 12: any provisioned PV bound to the claim's UID
		// dropped the record, while the claim's own CreateVolume was still
		// running; its volume was then tracked by nothing.
		{"another provisioned PV pre-bound to the claim", "pvc-recycled", "csi.tether.dev", true},
		{"a PV of the name from another driver", "pvc-uid-1", "other.csi", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := &v1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid-1", Finalizers: []string{"kubernetes.io/pvc-protection"}},
				Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}},
			}
			pv := &v1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: tt.pvName, Annotations: map[string]string{storagehelpers.AnnDynamicallyProvisioned: tt.driver}},
				Spec: v1.PersistentVolumeSpec{AccessModes: claim.Spec.AccessModes, Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
					ClaimRef:               &v1.ObjectReference{Namespace: "ns", Name: "c", UID: "uid-1"},
					PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: tt.driver, VolumeHandle: "h"}}},
			}
			inflight.Record(claim, "csi.tether.dev", "pvc-uid-1")
			client := fake.NewClientset(claim, pv)
			claims, volumes := NewStore[*v1.PersistentVolumeClaim](), NewIndex()
			w := &Writer{Client: client, Recorder: record.NewFakeRecorder(10), Volumes: volumes, Claims: claims,
				Metrics: NewMetrics(prometheus.NewRegistry(), volumes, claims)}
			if err := w.ApplyClaim(t.Context(), claim, ClaimDecision{Op: ClaimBind, Volume: pv}); err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().PersistentVolumeClaims("ns").Get(t.Context(), "c", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.VolumeName != pv.Name || got.Status.Phase != v1.ClaimBound {
				t.Errorf("claim not bound: volumeName %q, phase %q", got.Spec.VolumeName, got.Status.Phase)
			}
			if inflight.Holds(got) != tt.wantRecord {
				t.Errorf("in-flight record on the claim: %v, want %v (finalizers %v)", inflight.Holds(got), tt.wantRecord, got.Finalizers)
			}
			if len(got.Finalizers) == 0 || got.Finalizers[0] != "kubernetes.io/pvc-protection" {
				t.Errorf("other finalizers lost: %v", got.Finalizers)
			}
		})
	}
}
