package binder

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestClaimBehindVolume(t *testing.T) {
	claim := func(uid types.UID, rv string) *v1.PersistentVolumeClaim {
		return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: uid, ResourceVersion: rv}}
	}
	volume := func(uid types.UID, rv string) *v1.PersistentVolume {
		return &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{
			Namespace: "ns", Name: "c", UID: uid, ResourceVersion: rv}}}
	}
	for _, tc := range []struct {
		name  string
		claim *v1.PersistentVolumeClaim
		pv    *v1.PersistentVolume
		want  bool
	}{
		{"cache older than the provisioner's write", claim("u1", "10"), volume("u1", "12"), true},
		{"cache at the version the volume names", claim("u1", "12"), volume("u1", "12"), false},
		{"cache newer (the claim changed since)", claim("u1", "15"), volume("u1", "12"), false},
		{"volume of another claim of that name", claim("u2", "10"), volume("u1", "12"), false},
		{"volume names no version (pre-bound by hand)", claim("u1", "10"), volume("u1", ""), false},
		{"versions that are not numbers", claim("u1", "a"), volume("u1", "b"), false},
		{"volume without claimRef", claim("u1", "10"), &v1.PersistentVolume{}, false},
		{"no volume", claim("u1", "10"), nil, false},
	} {
		if got := ClaimBehindVolume(tc.claim, tc.pv); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
