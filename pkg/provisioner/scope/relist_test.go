package scope

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

func TestRelistBackoff(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	// Each step: a listing asked for at ask; want is how long it waits,
	// and it starts then.
	type step struct {
		ask  float64
		want time.Duration
	}
	for _, tt := range []struct {
		name  string
		steps []step
	}{
		{"the first at once", []step{{0, 0}}},
		{"a flapping label: the delay doubles up to the maximum", []step{
			{0, 0}, {0.5, 1500 * time.Millisecond}, {2.5, 3500 * time.Millisecond}, {6.5, 7500 * time.Millisecond},
			{14.5, 15500 * time.Millisecond}, {30.5, 29500 * time.Millisecond}, {60.5, 29500 * time.Millisecond}}},
		{"later than the delay: at once, and the delay still grows", []step{{0, 0}, {5, 0}, {10, 0}, {13, 5 * time.Second}}},
		{"quiet for longer than the maximum: back to the minimum", []step{{0, 0}, {1, time.Second}, {100, 0}, {101, time.Second}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := RelistBackoff{Min: 2 * time.Second, Max: 30 * time.Second}
			for i, s := range tt.steps {
				got := b.Wait(at(s.ask))
				if got != s.want {
					t.Fatalf("step %d, asked at %vs: wait %v, want %v", i, s.ask, got, s.want)
				}
				b.Started(at(s.ask).Add(got))
			}
		})
	}
}

func TestKeptWatchExpires(t *testing.T) {
	src := watch.NewFakeWithChanSize(1, false)
	w := newKeptWatch(context.Background(), src, func(ev watch.Event) (watch.Event, bool) { return ev, true }, nil, nil)
	src.Add(&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
	if ev := <-w.ResultChan(); ev.Type != watch.Added {
		t.Fatalf("first event %v, want the source's Added", ev.Type)
	}
	w.expire()
	ev := <-w.ResultChan()
	if err := apierrors.FromObject(ev.Object); ev.Type != watch.Error || !apierrors.IsResourceExpired(err) {
		t.Fatalf("after expire: %v %v, want an Expired error event", ev.Type, err)
	}
	if _, open := <-w.ResultChan(); open {
		t.Error("the result channel stays open after the Expired event")
	}
	if !src.IsStopped() {
		t.Error("the source watch is not stopped")
	}
	w.Stop() // after the end: no effect
}

// labelledPVs lists PVs (one page) and watches them with a new fake watch
// each time; it counts the listings.
type labelledPVs struct {
	mu       sync.Mutex
	items    []v1.PersistentVolume
	listings int
	// during, if set, is called inside the next listing, once.
	during func()
}

func (p *labelledPVs) list(_ context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	p.mu.Lock()
	p.listings++
	during := p.during
	p.during = nil
	out := &v1.PersistentVolumeList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: append([]v1.PersistentVolume(nil), p.items...)}
	p.mu.Unlock()
	if during != nil {
		during()
	}
	return out, nil
}

func (p *labelledPVs) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listings
}

// TestRelistListsAgainThroughTheKeeper: a reflector on the ListerWatcher
// lists again when Relist ends its watch (the Expired event, not a closed
// channel), and the new listing's Keeper reads the node's labels as they
// are then: a PV refused under the old labels is stored. A Relist asked
// while a listing is under way is served by one more listing.
func TestRelistListsAgainThroughTheKeeper(t *testing.T) {
	var mu sync.Mutex
	labels := map[string]string{"rack": "r1"}
	setLabels := func(l map[string]string) {
		mu.Lock()
		defer mu.Unlock()
		labels = l
	}
	s := Scope{Driver: driver, Node: "n1", NodeLabels: func() (map[string]string, bool) {
		mu.Lock()
		defer mu.Unlock()
		return labels, true
	}}
	later := pv(driver, nil, term("rack", v1.NodeSelectorOpIn, "r2"))
	later.Status.Phase = v1.VolumeReleased
	p := &labelledPVs{items: []v1.PersistentVolume{*later}}
	lw := &ListerWatcher{ListPage: TypedPages(p.list), Keeper: s.VolumeKeeper(), Empty: func() runtime.Object { return &v1.PersistentVolume{} },
		NewList: func() runtime.Object { return &v1.PersistentVolumeList{} },
		WatchAll: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			// Each watch carries an event (of a PV not kept): a watch that
			// closed after it would be started again with no listing.
			w := watch.NewFakeWithChanSize(1, false)
			others := pv(other, nil)
			others.Name, others.UID, others.ResourceVersion = "pv-other", "p2", "11"
			w.Modify(others)
			return w, nil
		}}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	// The informers' reflector, with a short backoff so that the test
	// need not wait for the default one (about a second per listing).
	r := cache.NewReflectorWithOptions(lw, &v1.PersistentVolume{}, store, cache.ReflectorOptions{
		Backoff: &wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1000}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.RunWithContext(ctx)
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: listings %d, stored %v", what, p.count(), store.ListKeys())
		}
	}
	poll("the first listing and its watch", func() bool { return p.count() == 1 && lastWatch(lw) != nil })
	if len(store.ListKeys()) != 0 {
		t.Fatalf("stored %v under rack r1, want nothing", store.ListKeys())
	}

	setLabels(map[string]string{"rack": "r2"})
	lw.Relist()
	poll("a second listing that stores the PV", func() bool {
		_, ok, _ := store.GetByKey("pv-1")
		return p.count() == 2 && ok
	})

	// A Relist inside a listing: the watch after it ends at once.
	first := lastWatch(lw)
	p.mu.Lock()
	p.during = lw.Relist
	p.mu.Unlock()
	lw.Relist()
	poll("two more listings", func() bool { return p.count() == 4 && lastWatch(lw) != first })
}

func lastWatch(lw *ListerWatcher) *keptWatch {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.current
}
