package binder

import (
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestStore(t *testing.T) {
	rv := func(v string) pvcOpt { return func(c *v1.PersistentVolumeClaim) { c.ResourceVersion = v } }
	type step struct {
		del   bool
		claim *v1.PersistentVolumeClaim
		held  string // version the call must return (Upsert only), "" to skip
		// returned puts the claim through Returned (a write's answer)
		// instead of Upsert (the informer's).
		returned bool
	}
	tests := []struct {
		name     string
		steps    []step
		wantRV   string // held version of default/c, "" for none
		wantUID  string
		wantLen  int
		wantCopy int // when > 0, Get must answer that step's object (1-based)
	}{
		{name: "newer version replaces the older",
			steps:  []step{{claim: newPVC("c", "1Gi", rv("5"))}, {claim: newPVC("c", "1Gi", rv("6")), held: "6"}},
			wantRV: "6", wantUID: "uid-c", wantLen: 1},
		{name: "older version is ignored",
			steps:  []step{{claim: newPVC("c", "1Gi", rv("6"))}, {claim: newPVC("c", "1Gi", rv("5")), held: "6"}},
			wantRV: "6", wantUID: "uid-c", wantLen: 1},
		{name: "same version from a write keeps the held copy",
			steps:  []step{{claim: newPVC("c", "1Gi", rv("6"))}, {claim: newPVC("c", "2Gi", rv("6")), held: "6", returned: true}},
			wantRV: "6", wantUID: "uid-c", wantLen: 1, wantCopy: 1},
		{name: "same version from the informer replaces the write's copy",
			steps:  []step{{claim: newPVC("c", "1Gi", rv("6")), returned: true}, {claim: newPVC("c", "1Gi", rv("6")), held: "6"}},
			wantRV: "6", wantUID: "uid-c", wantLen: 1, wantCopy: 2},
		{name: "older version from a write is ignored",
			steps:  []step{{claim: newPVC("c", "1Gi", rv("6"))}, {claim: newPVC("c", "1Gi", rv("5")), held: "6", returned: true}},
			wantRV: "6", wantUID: "uid-c", wantLen: 1, wantCopy: 1},
		{name: "newer version from a write replaces the informer's",
			steps:  []step{{claim: newPVC("c", "1Gi", rv("6"))}, {claim: newPVC("c", "1Gi", rv("7")), held: "7", returned: true}},
			wantRV: "7", wantUID: "uid-c", wantLen: 1, wantCopy: 2},
		{name: "versions compare as numbers",
			steps:  []step{{claim: newPVC("c", "1Gi", rv("99"))}, {claim: newPVC("c", "1Gi", rv("100")), held: "100"}},
			wantRV: "100", wantUID: "uid-c", wantLen: 1},
		{name: "delete forgets the claim",
			steps:  []step{{claim: newPVC("c", "1Gi", rv("5"))}, {del: true, claim: newPVC("c", "1Gi", rv("7"))}},
			wantRV: "", wantLen: 0},
		{name: "delete then a late upsert of the old version does not resurrect it",
			steps: []step{{claim: newPVC("c", "1Gi", rv("5"))}, {del: true, claim: newPVC("c", "1Gi", rv("7"))},
				{claim: newPVC("c", "1Gi", rv("6"))}},
			wantRV: "", wantLen: 0},
		{name: "delete then an upsert of the deleted version does not resurrect it",
			steps: []step{{claim: newPVC("c", "1Gi", rv("5"))}, {del: true, claim: newPVC("c", "1Gi", rv("7"))},
				{claim: newPVC("c", "1Gi", rv("7"))}},
			wantRV: "", wantLen: 0},
		{name: "recreated claim (newer version, new UID) is accepted after delete",
			steps: []step{{claim: newPVC("c", "1Gi", rv("5"))}, {del: true, claim: newPVC("c", "1Gi", rv("7"))},
				{claim: newPVC("c", "1Gi", rv("8"), claimUID("uid-new")), held: "8"}},
			wantRV: "8", wantUID: "uid-new", wantLen: 1},
		{name: "recreated claim accepted, then a late write of the old one is not",
			steps: []step{{claim: newPVC("c", "1Gi", rv("5"))}, {del: true, claim: newPVC("c", "1Gi", rv("7"))},
				{claim: newPVC("c", "1Gi", rv("8"), claimUID("uid-new"))}, {claim: newPVC("c", "1Gi", rv("6")), held: "8"}},
			wantRV: "8", wantUID: "uid-new", wantLen: 1},
		{name: "late delete of the old claim keeps the recreated one",
			steps: []step{{claim: newPVC("c", "1Gi", rv("5"))}, {claim: newPVC("c", "1Gi", rv("8"), claimUID("uid-new"))},
				{del: true, claim: newPVC("c", "1Gi", rv("7"))}},
			wantRV: "8", wantUID: "uid-new", wantLen: 1},
		{name: "claims of the same name in two namespaces are apart",
			steps: []step{{claim: newPVC("c", "1Gi", rv("5"))}, {claim: newPVC("c", "1Gi", rv("3"), func(c *v1.PersistentVolumeClaim) {
				c.Namespace = "other"
			}), held: "3"}},
			wantRV: "5", wantUID: "uid-c", wantLen: 2},
		{name: "delete in another namespace leaves this one",
			steps: []step{{claim: newPVC("c", "1Gi", rv("5"))}, {del: true, claim: newPVC("c", "1Gi", rv("9"), func(c *v1.PersistentVolumeClaim) {
				c.Namespace = "other"
			})}, {claim: newPVC("c", "1Gi", rv("6")), held: "6"}},
			wantRV: "6", wantUID: "uid-c", wantLen: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore[*v1.PersistentVolumeClaim]()
			for i, st := range tt.steps {
				if st.del {
					s.Delete(st.claim)
					continue
				}
				put := s.Upsert
				if st.returned {
					put = s.Returned
				}
				if got := put(st.claim); st.held != "" && got.ResourceVersion != st.held {
					t.Errorf("step %d: Upsert returned version %s, want %s", i, got.ResourceVersion, st.held)
				}
			}
			got, ok := s.Get(ns, "c")
			if tt.wantCopy > 0 && got != tt.steps[tt.wantCopy-1].claim {
				t.Errorf("the store holds another copy than step %d's", tt.wantCopy)
			}
			switch {
			case tt.wantRV == "" && ok:
				t.Errorf("Get = version %s, want none", got.ResourceVersion)
			case tt.wantRV != "" && !ok:
				t.Errorf("Get = none, want version %s", tt.wantRV)
			case ok && (got.ResourceVersion != tt.wantRV || string(got.UID) != tt.wantUID):
				t.Errorf("Get = version %s uid %s, want %s %s", got.ResourceVersion, got.UID, tt.wantRV, tt.wantUID)
			}
			if n := len(s.List()); n != tt.wantLen {
				t.Errorf("List has %d, want %d", n, tt.wantLen)
			}
		})
	}
}

func TestStoreClusterScoped(t *testing.T) {
	s := NewStore[*v1.PersistentVolume]()
	s.Upsert(newPV("pv-1", "1Gi"))
	if _, ok := s.Get("", "pv-1"); !ok {
		t.Fatal("Get(\"\", pv-1): not found")
	}
	s.Delete(newPV("pv-1", "1Gi", pvRV("2")))
	if _, ok := s.Get("", "pv-1"); ok {
		t.Fatal("Get after Delete: found")
	}
}

func TestStoreConcurrent(t *testing.T) {
	s := NewStore[*v1.PersistentVolumeClaim]()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 1; i <= 200; i++ {
				c := newPVC(fmt.Sprintf("c-%d", i%10), "1Gi")
				c.ResourceVersion = fmt.Sprint(i*8 + w)
				if i%50 == 0 {
					s.Delete(c)
				} else {
					s.Upsert(c)
				}
				s.Get(ns, c.Name)
				_ = s.List()
			}
		})
	}
	wg.Wait()
}

func TestTombstones(t *testing.T) {
	var ts tombstones
	if ts.buried("a", "1") {
		t.Fatal("empty tombstones bury a")
	}
	ts.add("a", "5")
	for _, tt := range []struct {
		rv   string
		want bool
	}{{"4", true}, {"5", true}, {"6", false}} {
		if got := ts.buried("a", tt.rv); got != tt.want {
			t.Errorf("buried(a, %s) = %v, want %v", tt.rv, got, tt.want)
		}
	}
	// A newer version cleared the record: even old versions pass now.
	if ts.buried("a", "4") {
		t.Error("buried(a, 4) after a newer version = true, want the record cleared")
	}
}

// Expired records go at the next delete, not at some later sweep, and the
// number held stays that of the deletes within one TTL.
func TestTombstonesExpire(t *testing.T) {
	now := time.Unix(1000, 0)
	ts := tombstones{now: func() time.Time { return now }}
	ts.add("old", "1")
	now = now.Add(tombstoneTTL / 2)
	ts.add("middle", "1")
	now = now.Add(tombstoneTTL/2 + time.Second)
	ts.add("recent", "1")
	if _, ok := ts.byKey["old"]; ok || ts.len() != 2 {
		t.Errorf("after one delete past the TTL: records %v, want middle and recent", ts.byKey)
	}
	if ts.buried("old", "1") {
		t.Error("expired tombstone still buries")
	}
	if !ts.buried("middle", "1") || !ts.buried("recent", "1") {
		t.Error("a tombstone within its TTL was swept")
	}

	// A record that expired but was not swept yet buries nothing.
	now = now.Add(tombstoneTTL)
	if ts.buried("middle", "1") {
		t.Error("a tombstone past its TTL still buries before the next sweep")
	}

	// A steady stream of deletes: one a second for ten TTLs.
	for i := range 10 * int(tombstoneTTL/time.Second) {
		now = now.Add(time.Second)
		ts.add(fmt.Sprintf("k%d", i), "1")
		if limit := int(tombstoneTTL/time.Second) + 1; ts.len() > limit || len(ts.order) > limit {
			t.Fatalf("after %d deletes: %d records, %d queued; want at most %d", i+1, ts.len(), len(ts.order), limit)
		}
	}
}

// A key deleted again keeps its newer record when the older one expires.
func TestTombstonesReAdded(t *testing.T) {
	now := time.Unix(1000, 0)
	ts := tombstones{now: func() time.Time { return now }}
	ts.add("a", "1")
	now = now.Add(tombstoneTTL / 2)
	ts.add("a", "7")
	now = now.Add(tombstoneTTL/2 + time.Second)
	ts.add("b", "1") // sweeps a's first record
	if !ts.buried("a", "7") {
		t.Error("a's second record was swept with its first")
	}
	if len(ts.order) != 2 {
		t.Errorf("queue %v, want a's second record and b", ts.order)
	}
}
