package scope

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// TestKeeperBehind: a listing behind the watch keeps what the watch has
// not told of since, and leaves the watch's word on the rest; Seen answers
// "maybe" until it has caught up, then exactly.
func TestKeeperBehind(t *testing.T) {
	k := claimKeeper()
	k.Behind()
	ours := func(name string, uid types.UID) *v1.PersistentVolumeClaim {
		return named(claim(map[string]string{annSP: driver}, nil, ""), name, uid)
	}
	if !k.Seen().Has("pvc-anything") || k.Seen().Complete() {
		t.Fatal("a Seen whose listing is behind answers as if it knew every name")
	}
	// The watch: b bound since the listing's version, c deleted, d created.
	if got := k.Modified(named(claim(map[string]string{annSP: driver}, nil, "pv-b"), "b", "ub")); got != Skip {
		t.Errorf("Modified(b, bound) = %v, want skip", got)
	}
	if got := k.Deleted(ours("c", "uc")); got != Skip {
		t.Errorf("Deleted(c) = %v, want skip", got)
	}
	if got := k.Added(ours("d", "ud")); got != Keep {
		t.Errorf("Added(d) = %v, want keep", got)
	}
	// The listing, as of before those: a, b unbound, c.
	for _, s := range []struct {
		claim *v1.PersistentVolumeClaim
		want  Action
	}{
		{ours("a", "ua"), Keep},
		{ours("b", "ub"), Skip}, // the watch's version is newer
		{ours("c", "uc"), Skip}, // deleted since
		{named(claim(nil, nil, "pv-e"), "e", "ue"), Skip},
	} {
		if got := k.Backfill(s.claim); got != s.want {
			t.Errorf("Backfill(%s) = %v, want %v", s.claim.Name, got, s.want)
		}
	}
	k.CaughtUp()
	if !k.Seen().Complete() {
		t.Fatal("Seen still open after CaughtUp")
	}
	for name, want := range map[string]bool{"pvc-ua": true, "pvc-ub": true, "pvc-uc": false, "pvc-ud": true, "pvc-ue": true, "pvc-uz": false} {
		if got := k.Seen().Has(name); got != want {
			t.Errorf("Seen.Has(%s) = %v, want %v", name, got, want)
		}
	}
	if k.Seen().Len() != 4 || k.Held() != 2 {
		t.Errorf("Seen.Len = %d, Held = %d; want 4 and 2 (a, d)", k.Seen().Len(), k.Held())
	}
	if got := k.Backfill(ours("f", "uf")); got != Skip {
		t.Errorf("Backfill after CaughtUp = %v, want skip", got)
	}
}

// TestKeeperBehindReplacedByAListing: a listing (Relist) in the middle of
// one behind the watch replaces it: what the late one brings is skipped.
func TestKeeperBehindReplacedByAListing(t *testing.T) {
	k := claimKeeper()
	k.Behind()
	k.Relist([]runtime.Object{named(claim(nil, nil, ""), "a", "ua")})
	if !k.Seen().Complete() || k.Seen().Has("pvc-ub") {
		t.Fatal("the listing did not close Seen")
	}
	if got := k.Backfill(named(claim(map[string]string{annSP: driver}, nil, ""), "b", "ub")); got != Skip {
		t.Errorf("Backfill after a listing = %v, want skip", got)
	}
	k.CaughtUp()
	if k.Seen().Has("pvc-ub") || !k.Seen().Has("pvc-ua") {
		t.Error("CaughtUp after a listing changed Seen")
	}
}

// TestKeeperBehindAnyInterleaving: whatever the order in which a listing
// behind the watch and the watch's events reach the Keeper, once it has
// caught up Seen holds exactly the names of the claims that exist, and
// what it keeps (as a cache would hold it, from what the Keeper said) is
// every existing claim Hold accepts at its latest version, and only
// existing claims. Worlds and orders are drawn from a seed.
func TestKeeperBehindAnyInterleaving(t *testing.T) {
	for seed := range uint64(500) {
		r := rand.New(rand.NewPCG(seed, 7))
		k := claimKeeper()
		hold := Scope{Driver: driver}.Claim
		// The world at the listing's version, then changes after it.
		type version struct {
			claim   *v1.PersistentVolumeClaim
			deleted bool
		}
		draw := func(name string, uid types.UID) *v1.PersistentVolumeClaim {
			switch r.IntN(3) {
			case 0:
				return named(claim(map[string]string{annSP: driver}, nil, ""), name, uid)
			case 1:
				return named(claim(map[string]string{annSP: driver}, nil, "pv-"+name), name, uid)
			}
			return named(claim(nil, nil, ""), name, uid)
		}
		current := map[string]*v1.PersistentVolumeClaim{}
		var listing []runtime.Object
		for i := range 6 {
			name := fmt.Sprintf("c%d", i)
			if r.IntN(4) > 0 {
				c := draw(name, types.UID(name+"-1"))
				current[name] = c
				listing = append(listing, c)
			}
		}
		var events []version
		for j := range 10 {
			name := fmt.Sprintf("c%d", r.IntN(7))
			c, exists := current[name]
			switch {
			case !exists:
				c = draw(name, types.UID(fmt.Sprintf("%s-%d", name, j+2)))
				current[name] = c
				events = append(events, version{claim: c})
			case r.IntN(3) == 0:
				delete(current, name)
				events = append(events, version{claim: c, deleted: true})
			default:
				c = draw(name, c.UID)
				current[name] = c
				events = append(events, version{claim: c})
			}
		}
		// The cache, as the Keeper's answers make it.
		cache := map[string]*v1.PersistentVolumeClaim{}
		apply := func(c *v1.PersistentVolumeClaim, a Action) {
			switch a {
			case Keep:
				cache[c.Name] = c
			case Forget:
				delete(cache, c.Name)
			}
		}
		known := map[string]types.UID{} // what the watch has told of, by name
		for _, obj := range listing {
			c := obj.(*v1.PersistentVolumeClaim)
			known[c.Name] = c.UID
		}
		k.Behind()
		for li, ei := 0, 0; li < len(listing) || ei < len(events); {
			if ei == len(events) || (li < len(listing) && r.IntN(2) == 0) {
				c := listing[li].(*v1.PersistentVolumeClaim)
				apply(c, k.Backfill(c))
				li++
				continue
			}
			e := events[ei]
			ei++
			uid, had := known[e.claim.Name]
			switch {
			case e.deleted:
				delete(known, e.claim.Name)
				apply(e.claim, k.Deleted(e.claim))
			case had && uid == e.claim.UID:
				apply(e.claim, k.Modified(e.claim))
			default:
				known[e.claim.Name] = e.claim.UID
				apply(e.claim, k.Added(e.claim))
			}
		}
		k.CaughtUp()
		for i := range 7 {
			name := fmt.Sprintf("c%d", i)
			c, exists := current[name]
			got, held := cache[name]
			switch {
			case !exists && held:
				t.Fatalf("seed %d: %s is gone, the cache holds it", seed, name)
			case exists && hold(c) && (!held || got != c):
				t.Fatalf("seed %d: %s exists and is ours; the cache holds %v", seed, name, got)
			case held && got != c:
				t.Fatalf("seed %d: the cache holds an old version of %s", seed, name)
			}
			for j := range 12 {
				vol := fmt.Sprintf("pvc-%s-%d", name, j)
				want := exists && vol == "pvc-"+string(c.UID)
				if k.Seen().Has(vol) != want {
					t.Fatalf("seed %d: Seen.Has(%s) = %v, want %v", seed, vol, !want, want)
				}
			}
		}
		if k.Seen().Len() != len(current) || k.Held() != len(cache) {
			t.Fatalf("seed %d: Seen.Len %d for %d claims, Held %d for a cache of %d", seed, k.Seen().Len(), len(current), k.Held(), len(cache))
		}
	}
}

// behindInformer runs a real informer on a ListerWatcher with Behind set,
// over the claims of p and the watches it hands out (one fake watch each,
// sent on watches); set changes the ListerWatcher first.
func behindInformer(t *testing.T, p *pagedClaims, set ...func(*ListerWatcher)) (cache.SharedIndexInformer, *Keeper, chan *watch.FakeWatcher, context.Context) {
	t.Helper()
	k := claimKeeper()
	watches := make(chan *watch.FakeWatcher, 10)
	lw := &ListerWatcher{ListPage: TypedPages(p.list), NewList: newClaimList, Keeper: k, Behind: true, PageSize: testPage,
		Empty: func() runtime.Object { return &v1.PersistentVolumeClaim{} },
		WatchAll: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			fw := watch.NewFakeWithChanSize(10, false)
			watches <- fw
			return fw, nil
		}}
	for _, f := range set {
		f(lw)
	}
	inf := cache.NewSharedIndexInformer(lw, &v1.PersistentVolumeClaim{}, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	return inf, k, watches, ctx
}

func manyClaims(n int, ours func(i int) bool) []v1.PersistentVolumeClaim {
	var out []v1.PersistentVolumeClaim
	for i := range n {
		c := claim(nil, nil, "pv")
		if ours(i) {
			c = claim(map[string]string{annSP: driver}, nil, "")
		}
		c.Name, c.UID, c.ResourceVersion = fmt.Sprint("c", i), types.UID(fmt.Sprint("u", i)), "9"
		out = append(out, *c)
	}
	return out
}

func poll(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestInformerListsBehindTheWatch: the informer syncs on the first page;
// the watch's events are served while the rest is read; the listing's
// objects the watch told of since are left at the watch's word; once it
// has caught up the store holds every claim of ours at its latest
// version, Seen every name, and the reflector the watch's resourceVersion.
func TestInformerListsBehindTheWatch(t *testing.T) {
	n := FirstPage + 2*testPage + 10
	p := &pagedClaims{hold: make(chan struct{}), items: manyClaims(n, func(i int) bool { return i%50 == 0 })}
	inf, k, watches, ctx := behindInformer(t, p)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	if got := len(inf.GetStore().ListKeys()); got != FirstPage/50 || k.Seen().Complete() {
		t.Fatalf("synced with %d claims, Seen complete %v: want the first page's %d, and Seen open", got, k.Seen().Complete(), FirstPage/50)
	}
	fw := <-watches
	// While the rest waits: a claim of ours in the second page bound
	// (no longer ours), one deleted, a new one of ours.
	bound := p.items[FirstPage+50].DeepCopy()
	bound.Spec.VolumeName, bound.ResourceVersion = "pv-x", "11"
	fw.Modify(bound)
	gone := p.items[FirstPage+100].DeepCopy()
	gone.ResourceVersion = "12"
	fw.Delete(gone)
	fresh := named(claim(map[string]string{annSP: driver}, nil, ""), "new", "u-new")
	fresh.ResourceVersion = "13"
	fw.Add(fresh)
	poll(ctx, t, "the new claim", func() bool { _, ok, _ := inf.GetStore().GetByKey("ns/new"); return ok })
	close(p.hold)
	poll(ctx, t, "the listing to catch up", func() bool { return k.Seen().Complete() })
	want := map[string]bool{"ns/new": true}
	for i := 0; i < n; i += 50 {
		want[fmt.Sprint("ns/c", i)] = i != FirstPage+50 && i != FirstPage+100
	}
	poll(ctx, t, "the store", func() bool {
		keys := inf.GetStore().ListKeys()
		if len(keys) != len(want)-2 {
			return false
		}
		for _, key := range keys {
			if !want[key] {
				return false
			}
		}
		return inf.LastSyncResourceVersion() == "13"
	})
	for name, has := range map[string]bool{"pvc-u1": true, fmt.Sprint("pvc-u", n-1): true, "pvc-u-new": true,
		fmt.Sprint("pvc-u", FirstPage+100): false, fmt.Sprint("pvc-u", FirstPage+50): true, "pvc-u-none": false} {
		if k.Seen().Has(name) != has {
			t.Errorf("Seen.Has(%s) = %v, want %v", name, !has, has)
		}
	}
	if k.Seen().Len() != n {
		t.Errorf("Seen holds %d names, want %d", k.Seen().Len(), n)
	}
}

// TestListingBehindCutShortListsWhole: a page of the listing behind the
// watch that fails, or a watch that ends before the listing caught up,
// makes the reflector list anew, whole: the store and Seen end complete.
func TestListingBehindCutShortListsWhole(t *testing.T) {
	for _, how := range []string{"a page fails", "the watch ends"} {
		t.Run(how, func(t *testing.T) {
			n := FirstPage + testPage + 10
			p := &pagedClaims{hold: make(chan struct{}), items: manyClaims(n, func(i int) bool { return i%50 == 0 })}
			inf, k, watches, ctx := behindInformer(t, p)
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("no sync")
			}
			fw := <-watches
			switch how {
			case "a page fails":
				p.mu.Lock()
				p.failNext = fmt.Errorf("connection reset")
				p.mu.Unlock()
			case "the watch ends":
				fw.Stop()
			}
			close(p.hold)
			poll(ctx, t, "a whole listing", func() bool {
				return k.Seen().Complete() && len(inf.GetStore().ListKeys()) == (n+49)/50
			})
			if k.Seen().Len() != n {
				t.Errorf("Seen holds %d names, want %d", k.Seen().Len(), n)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			firsts := 0
			for _, c := range p.calls {
				if c.Continue == "" {
					firsts++
				}
			}
			if firsts != 2 {
				t.Errorf("%d listings started, want 2: the one behind the watch, then one whole (calls %+v)", firsts, p.calls)
			}
		})
	}
}
