package scope

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-csi/tether/pkg/inflight"
)

func named(c *v1.PersistentVolumeClaim, name string, uid types.UID) *v1.PersistentVolumeClaim {
	c.Name, c.UID = name, uid
	return c
}

func claimKeeper() *Keeper {
	return Scope{Driver: driver}.ClaimKeeper(func(uid string) string { return "pvc-" + uid })
}

// TestKeeperClaimLife follows one claim through what its tenant, the
// binder and the provisioner write, and what the cache does each time.
func TestKeeperClaimLife(t *testing.T) {
	k := claimKeeper()
	steps := []struct {
		name  string
		do    func(runtime.Object) Action
		claim *v1.PersistentVolumeClaim
		want  Action
	}{
		{"created, not handed over yet", k.Added, claim(nil, nil, ""), Skip},
		{"handed to the driver", k.Modified, claim(map[string]string{annSP: driver}, nil, ""), Keep},
		{"the record written", k.Modified, claim(map[string]string{annSP: driver, inflight.AnnVolume: "pvc-u1"}, []string{inflight.Finalizer}, ""), Keep},
		{"the tenant strips all of it, unbound", k.Modified, claim(nil, nil, ""), Keep},
		{"bound, nothing of ours on it", k.Modified, claim(map[string]string{annSP: driver}, nil, "pv-1"), Forget},
		{"updated again, bound", k.Modified, claim(map[string]string{annSP: driver, "x": "y"}, nil, "pv-1"), Skip},
		{"deleted", k.Deleted, claim(map[string]string{annSP: driver}, nil, "pv-1"), Skip},
	}
	for _, s := range steps {
		if got := s.do(s.claim); got != s.want {
			t.Fatalf("%s: %v, want %v", s.name, got, s.want)
		}
		if s.name == "updated again, bound" && !k.Seen().Has("pvc-u1") {
			t.Fatalf("%s: Seen lost the claim's volume name", s.name)
		}
	}
	if k.Seen().Has("pvc-u1") || k.Held() != 0 {
		t.Errorf("after the deletion: Seen has the name %v, held %d; want neither", k.Seen().Has("pvc-u1"), k.Held())
	}
}

func TestKeeperDeletedWhileKept(t *testing.T) {
	k := claimKeeper()
	c := claim(map[string]string{annSP: driver}, nil, "")
	if got := k.Added(c); got != Keep {
		t.Fatalf("Added = %v, want keep", got)
	}
	if got := k.Deleted(c); got != Forget {
		t.Fatalf("Deleted = %v, want forget", got)
	}
}

func TestKeeperReplacedUnderTheSameName(t *testing.T) {
	k := claimKeeper()
	if got := k.Added(claim(map[string]string{annSP: driver}, nil, "")); got != Keep {
		t.Fatalf("Added = %v", got)
	}
	// A claim of the same name and another UID, not ours: the one kept is
	// gone (its deletion was not seen) and the new one is not kept.
	if got := k.Modified(named(claim(nil, nil, ""), "c", "u2")); got != Forget {
		t.Fatalf("Modified(another UID) = %v, want forget", got)
	}
	// Its deletion does not remove another UID's entry.
	k.Added(claim(map[string]string{annSP: driver}, nil, ""))
	if got := k.Deleted(named(claim(nil, nil, ""), "c", "u3")); got != Skip {
		t.Errorf("Deleted(another UID) = %v, want skip", got)
	}
}

func TestKeeperRelist(t *testing.T) {
	k := claimKeeper()
	sticky := claim(map[string]string{annSP: driver}, nil, "")
	k.Added(sticky)
	k.Added(named(claim(nil, nil, ""), "d", "u2"))
	// The tenant stripped the kept claim while the watch was down; a new
	// claim of the driver appeared; the other one was deleted.
	keep := k.Relist([]runtime.Object{
		claim(nil, nil, ""),
		named(claim(map[string]string{annSP: driver}, nil, ""), "e", "u3"),
		named(claim(nil, nil, "pv-9"), "f", "u4"),
	})
	if want := []bool{true, true, false}; keep[0] != want[0] || keep[1] != want[1] || keep[2] != want[2] {
		t.Fatalf("Relist = %v, want %v", keep, want)
	}
	for name, want := range map[string]bool{"pvc-u1": true, "pvc-u2": false, "pvc-u3": true, "pvc-u4": true} {
		if got := k.Seen().Has(name); got != want {
			t.Errorf("Seen.Has(%s) = %v, want %v", name, got, want)
		}
	}
	if k.Held() != 2 {
		t.Errorf("Held = %d, want 2", k.Held())
	}
}

func TestKeeperRelistInPagesKeepsSeenUntilDone(t *testing.T) {
	k := claimKeeper()
	k.Added(claim(nil, nil, "pv-1"))
	k.relistBegin()
	k.relistOne(named(claim(nil, nil, ""), "d", "u2"))
	if !k.Seen().Has("pvc-u1") {
		t.Fatal("Seen lost a name in the middle of a listing")
	}
	k.relistOne(named(claim(nil, nil, ""), "e", "u3"))
	k.relistDone()
	if k.Seen().Has("pvc-u1") || !k.Seen().Has("pvc-u2") || !k.Seen().Has("pvc-u3") {
		t.Error("after the listing, Seen does not hold exactly its names")
	}
}

func TestSeenCountsEachObject(t *testing.T) {
	s := NewSeen()
	s.add([]string{"a", "a", "b"}, +1)
	s.add([]string{"a"}, -1)
	if !s.Has("a") || !s.Has("b") || s.Has("c") || s.Len() != 2 {
		t.Fatalf("Seen after adds: a %v b %v c %v len %d", s.Has("a"), s.Has("b"), s.Has("c"), s.Len())
	}
	s.add([]string{"a", "b"}, -1)
	if s.Has("a") || s.Has("b") || s.Len() != 0 {
		t.Error("Seen holds names removed as often as added")
	}
	var none *Seen
	if none.Has("a") {
		t.Error("a nil Seen has a name")
	}
}

// TestKeeperStaticDeletePVKeptUntilFinalized: a static CSI PV of the
// driver with reclaim policy Delete stays in the cache from Available
// through its Bound write until the static reclaimer's deletion finalizer
// is on it, so that the reclaimer sees it Bound and adds the finalizer,
// and a later deletion while Bound cannot take the PV without its volume
// (issue 49, defect 1: the PV was forgotten at its Bound write).
func TestKeeperStaticDeletePVKeptUntilFinalized(t *testing.T) {
	k := Scope{Driver: driver}.VolumeKeeper()
	version := func(phase v1.PersistentVolumePhase, finalizers ...string) *v1.PersistentVolume {
		p := pv(driver, nil)
		p.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimDelete
		p.Status.Phase, p.Finalizers = phase, append([]string{"kubernetes.io/pv-protection"}, finalizers...)
		return p
	}
	for _, s := range []struct {
		name string
		do   func(runtime.Object) Action
		pv   *v1.PersistentVolume
		want Action
	}{
		{"made by the admin, Available", k.Added, version(v1.VolumeAvailable), Keep},
		{"bound by the binder", k.Modified, version(v1.VolumeBound), Keep},
		{"the reclaimer's finalizer on", k.Modified, version(v1.VolumeBound, libraryFinalizer), Forget},
		{"released", k.Modified, version(v1.VolumeReleased, libraryFinalizer), Keep},
	} {
		if got := s.do(s.pv); got != s.want {
			t.Fatalf("%s: %v, want %v", s.name, got, s.want)
		}
	}
}
