package sim

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// Node-mode schedules list claims and PVs behind the watch at every start
// of a provisioner (behind.go), and the listings catch up. Of a scan of
// seeds 1 to 300, seed 5 is the first to run an orphan sweep while a
// listing is behind, and 10 the first to reach objects the watch told of
// first; both add objects from such listings. Each schedule must pass.
func TestSimListingsBehindTheWatch(t *testing.T) {
	total := map[string]int{}
	for _, seed := range []int64{5, 10} {
		s := Run(seed, 1)
		if s.Violations != 0 {
			t.Fatalf("seed %d: %s\n%s", seed, strings.Join(s.Failed[0].Violations, "\n"), strings.Join(s.Failed[0].Trace, "\n"))
		}
		for _, k := range []string{"listings behind the watch started", "listings behind the watch caught up", "objects a listing behind the watch added"} {
			if s.Counts[k] == 0 {
				t.Errorf("seed %d: no %s (counts %v): the random stream moved; find another seed", seed, k, s.Counts)
			}
		}
		for k, n := range s.Counts {
			total[k] += n
		}
	}
	for _, k := range []string{"objects a listing behind the watch skipped",
		"objects a listing behind the watch reached after the watch told of them",
		"orphan sweeps run while a listing was behind the watch"} {
		if total[k] == 0 {
			t.Errorf("no %s in seeds 5 and 10: the random stream moved; find other seeds", k)
		}
	}
}

// TestListingBehindTheWatch: a node-mode provisioner of the current
// release starts with its claims listed behind the watch: its store empty
// and its handlers synced at once, Seen open. The listing's claim that the
// watch told of first is skipped, the other added (its handlers told), and
// the last one closes Seen; a restart starts a new listing, which a full
// listing replaces.
func TestListingBehindTheWatch(t *testing.T) {
	seed := int64(1)
	for !newWorld(seed).cfg.Node {
		seed++
	}
	w := newWorld(seed)
	w.setup()
	ours := func() string {
		c := w.newClaim("ns-1", classWFFC, "1Gi")
		c.Annotations = map[string]string{storagehelpers.AnnStorageProvisioner: driverName, storagehelpers.AnnSelectedNode: nodeNames[0]}
		w.create(c)
		return objKey(c.Namespace, c.Name)
	}
	first, second := ours(), ours()
	w.startProvisioner(0)
	c := w.provs[0].caches
	inf, k := c.inf[rClaims], c.keepers[rClaims]
	if n := len(inf.indexer.ListKeys()); n != 0 || k.Seen().Complete() || len(c.backfill[rClaims]) != 2 {
		t.Fatalf("at the start: %d claims in the store, Seen complete %v, %d claims to backfill; want 0, false, 2", n, k.Seen().Complete(), len(c.backfill[rClaims]))
	}
	for _, l := range inf.listeners {
		if !l.HasSynced() {
			t.Fatal("a claim handler has not synced at the start of a listing behind the watch")
		}
	}
	// The watch tells of the first claim (a new label) before the listing
	// reaches it.
	cur := w.api.peek(rClaims, first).(*v1.PersistentVolumeClaim).DeepCopy()
	cur.Labels = map[string]string{"app": "x"}
	if _, err := w.api.Update(cur, false); err != nil {
		t.Fatal(err)
	}
	c.deliver(rClaims, first)
	if got := c.backfillNext(rClaims); got != "reaches claim "+first+": skipped" {
		t.Errorf("the listing's first claim: %q", got)
	}
	if obj, ok, _ := inf.indexer.GetByKey(first); !ok || obj.(*v1.PersistentVolumeClaim).Labels["app"] != "x" {
		t.Errorf("the store holds %v for %s; want the watch's version", obj, first)
	}
	if got := c.backfillNext(rClaims); got != "reaches claim "+second+": kept; caught up" {
		t.Errorf("the listing's second claim: %q", got)
	}
	if _, ok, _ := inf.indexer.GetByKey(second); !ok || !k.Seen().Complete() || k.Seen().Len() != 2 || len(c.backfill) != 1 {
		t.Errorf("caught up: %s in the store %v, Seen complete %v holding %d names, %d listings left; want true, true, 2, 1 (the PVs')",
			second, ok, k.Seen().Complete(), k.Seen().Len(), len(c.backfill))
	}
	if adds := len(inf.listeners[0].fifo); adds != 2 {
		t.Errorf("%d notifications for the claim handler; want 2 (the watch's add of %s, the listing's of %s)", adds, first, second)
	}
	// A restart lists behind the watch again; a full listing replaces it.
	w.startProvisioner(0)
	c = w.provs[0].caches
	if kept, _ := c.relistResource(rClaims); kept != 2 || c.backfill[rClaims] != nil || !c.keepers[rClaims].Seen().Complete() {
		t.Errorf("a full listing in place of one behind the watch: %d kept, backfill %v, Seen complete %v; want 2, none, true",
			kept, c.backfill[rClaims], c.keepers[rClaims].Seen().Complete())
	}
	if w.scoped["listings behind the watch replaced by a full listing"] != 1 {
		t.Errorf("counts %v: want one listing behind the watch replaced", w.scoped)
	}
}
