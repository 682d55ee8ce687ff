package inflight

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

func TestSettle(t *testing.T) {
	claim := func(finalizers ...string) *v1.PersistentVolumeClaim {
		return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid-1", Finalizers: finalizers}}
	}
	pv := func(uid string, provisioned bool) *v1.PersistentVolume {
		p := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"}}
		if uid != "" {
			p.Spec.ClaimRef = &v1.ObjectReference{Namespace: "ns", Name: "c", UID: types.UID(uid)}
		}
		if provisioned {
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned, "x")
		}
		return p
	}
	tests := []struct {
		name    string
		claim   *v1.PersistentVolumeClaim
		pv      *v1.PersistentVolume
		settled bool
		left    []string
	}{
		{"the claim's provisioned PV", claim(Finalizer), pv("uid-1", true), true, nil},
		{"other finalizers stay", claim("a", Finalizer, "b"), pv("uid-1", true), true, []string{"a", "b"}},
		{"no record", claim("a"), pv("uid-1", true), false, []string{"a"}},
		{"a static PV does not track the claim's volume", claim(Finalizer), pv("uid-1", false), false, []string{Finalizer}},
		{"a PV for an earlier claim of the same name", claim(Finalizer), pv("other", true), false, []string{Finalizer}},
		{"an unbound PV", claim(Finalizer), pv("", true), false, []string{Finalizer}},
		{"no PV", claim(Finalizer), nil, false, []string{Finalizer}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Settle(tt.claim, tt.pv); got != tt.settled {
				t.Errorf("Settle = %v, want %v", got, tt.settled)
			}
			if !slices.Equal(tt.claim.Finalizers, tt.left) {
				t.Errorf("finalizers %v, want %v", tt.claim.Finalizers, tt.left)
			}
		})
	}
}
