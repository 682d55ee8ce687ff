package inflight

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
		{"numbers, not strings, are compared", claim("u1", "9"), volume("u1", "10"), true},
		{"cache at the version the volume names", claim("u1", "12"), volume("u1", "12"), false},
		{"cache newer (the claim changed since)", claim("u1", "15"), volume("u1", "12"), false},
		{"volume of another claim of that name", claim("u2", "10"), volume("u1", "12"), false},
		{"volume names no version (pre-bound by hand)", claim("u1", "10"), volume("u1", ""), false},
		{"versions that are not numbers", claim("u1", "a"), volume("u1", "b"), false},
		{"relayed version not a number", claim("u1", "10"), volume("u1", "12a"), false},
		{"cached version not a number", claim("u1", "x"), volume("u1", "12"), false},
		{"cached version empty", claim("u1", ""), volume("u1", "12"), false},
		{"signed number", claim("u1", "10"), volume("u1", "+12"), false},
		{"volume without claimRef", claim("u1", "10"), &v1.PersistentVolume{}, false},
		{"no volume", claim("u1", "10"), nil, false},
		{"no claim", nil, volume("u1", "12"), false},
	} {
		if got := ClaimBehindVolume(tc.claim, tc.pv); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRelayClaimVersion(t *testing.T) {
	volume := func(rv string) *v1.PersistentVolume {
		return &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{
			Namespace: "ns", Name: "c", UID: "u1", ResourceVersion: rv}}}
	}
	pv := volume("10")
	RelayClaimVersion(pv, "12")
	if got := pv.Spec.ClaimRef.ResourceVersion; got != "12" {
		t.Errorf("relayed: claimRef version %q, want 12", got)
	}
	pv = volume("10")
	RelayClaimVersion(pv, "")
	if got := pv.Spec.ClaimRef.ResourceVersion; got != "10" {
		t.Errorf("nothing to relay: claimRef version %q, want 10 kept", got)
	}
	bare := &v1.PersistentVolume{}
	RelayClaimVersion(bare, "12")
	if bare.Spec.ClaimRef != nil {
		t.Errorf("no claimRef: got %+v, want none", bare.Spec.ClaimRef)
	}
	RelayClaimVersion(nil, "12")

	// The round trip: the binder reads as behind what a claim cache older
	// than the relayed version holds, and nothing once it has caught up.
	cached := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1", ResourceVersion: "10"}}
	pv = volume("10")
	RelayClaimVersion(pv, "12")
	if !ClaimBehindVolume(cached, pv) {
		t.Errorf("claim at 10, PV relays 12: not behind, want behind")
	}
	cached.ResourceVersion = "12"
	if ClaimBehindVolume(cached, pv) {
		t.Errorf("claim at 12, PV relays 12: behind, want not")
	}
}
