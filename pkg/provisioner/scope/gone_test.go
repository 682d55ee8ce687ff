package scope

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func TestGoneForgetsTheOldestFirst(t *testing.T) {
	g := NewGone(3)
	for i := range 5 {
		g.Add(types.UID(fmt.Sprint(i)))
	}
	g.Add("4") // again: no room taken
	for i, want := range []bool{false, false, true, true, true, false} {
		if got := g.Has(types.UID(fmt.Sprint(i))); got != want {
			t.Errorf("Has(%d) = %v, want %v", i, got, want)
		}
	}
	if g.Has("") || (*Gone)(nil).Has("1") {
		t.Error("an empty UID or a nil Gone holds nothing")
	}
	(*Gone)(nil).Add("1") // no panic
}

// The claim Keeper's Gone holds the UIDs of bound claims deleted: an
// unbound claim never had a PV to release.
func TestClaimKeeperRemembersBoundClaimsDeleted(t *testing.T) {
	k := claimKeeper()
	bound, unbound := named(claim(nil, nil, "pv-1"), "b", "ub"), named(claim(nil, nil, ""), "u", "uu")
	for _, c := range []runtime.Object{bound, unbound} {
		k.Added(c)
		if k.Gone().Has(c.(*v1.PersistentVolumeClaim).UID) {
			t.Fatal("a claim that exists is gone")
		}
		k.Deleted(c)
	}
	if !k.Gone().Has("ub") || k.Gone().Has("uu") {
		t.Errorf("gone: bound %v (want true), unbound %v (want false)", k.Gone().Has("ub"), k.Gone().Has("uu"))
	}
	if (Scope{Driver: driver}).VolumeKeeper().Gone() != nil {
		t.Error("the PV Keeper remembers deletions")
	}
}
