package scope

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// pagedClaims lists claims a page at a time, as the API server does with
// a limit, and records the options of each call.
type pagedClaims struct {
	mu    sync.Mutex
	items []v1.PersistentVolumeClaim
	calls []metav1.ListOptions
	// pages are the pages returned, as the lister holds them after.
	pages []*v1.PersistentVolumeClaimList
	// counted: the pages say how many objects follow them.
	counted bool
	// hold, if set, is waited on before each page after a first one;
	// failNext, if set, fails the next such page.
	hold     chan struct{}
	failNext error
}

func (p *pagedClaims) list(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	if p.hold != nil && o.Continue != "" {
		select {
		case <-p.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, o)
	if err := p.failNext; err != nil && o.Continue != "" {
		p.failNext = nil
		return nil, err
	}
	start := 0
	if o.Continue != "" {
		if _, err := fmt.Sscan(o.Continue, &start); err != nil {
			return nil, err
		}
	}
	end := min(start+int(o.Limit), len(p.items))
	out := &v1.PersistentVolumeClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}}
	out.Items = append(out.Items, p.items[start:end]...)
	if end < len(p.items) {
		out.Continue = fmt.Sprint(end)
		if p.counted {
			out.RemainingItemCount = ptr.To(int64(len(p.items) - end))
		}
	}
	p.pages = append(p.pages, out)
	return out, nil
}

func newClaimList() runtime.Object { return &v1.PersistentVolumeClaimList{} }

// testPage is the pages' size in the tests of listings.
const testPage = 500

func TestListerWatcherListsInPagesAndKeepsOurs(t *testing.T) {
	p := &pagedClaims{}
	for i := range 2*testPage + 10 {
		c := claim(nil, nil, "pv")
		if i%100 == 0 {
			c = claim(map[string]string{annSP: driver}, nil, "")
		}
		c.Name, c.UID = fmt.Sprint("c", i), types.UID(fmt.Sprint("u", i))
		p.items = append(p.items, *c)
	}
	k := claimKeeper()
	lw := &ListerWatcher{ListPage: TypedPages(p.list), NewList: newClaimList, Empty: func() runtime.Object { return &v1.PersistentVolumeClaim{} }, Keeper: k, PageSize: testPage}
	out, err := lw.List(metav1.ListOptions{ResourceVersion: "0", Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	list := out.(*v1.PersistentVolumeClaimList)
	if len(list.Items) != 11 || list.Continue != "" || list.ResourceVersion != "10" {
		t.Errorf("listing: %d items, continue %q, rv %q; want 11, none, 10", len(list.Items), list.Continue, list.ResourceVersion)
	}
	if len(p.calls) != 3 || p.calls[0].ResourceVersion != "" || p.calls[0].Limit != testPage {
		t.Errorf("calls %+v: want 3 pages of %d from the current state", p.calls, testPage)
	}
	if !k.Seen().Has("pvc-u1") || !k.Seen().Has(fmt.Sprint("pvc-u", 2*testPage+9)) || k.Held() != 11 {
		t.Errorf("Seen misses names, or held %d != 11", k.Held())
	}
}

// TestListerWatcherSizesSeenOnce: a listing returns a list of its own that
// holds only what is kept, and sizes Seen's hashes once from the first
// page's count of the rest.
func TestListerWatcherSizesSeenOnce(t *testing.T) {
	p := &pagedClaims{counted: true}
	for i := range 3*testPage + 7 {
		c := claim(nil, nil, "pv")
		if i == testPage+1 {
			c = claim(map[string]string{annSP: driver}, nil, "")
		}
		c.Name, c.UID = fmt.Sprint("c", i), types.UID(fmt.Sprint("u", i))
		p.items = append(p.items, *c)
	}
	k := claimKeeper()
	lw := &ListerWatcher{ListPage: TypedPages(p.list), NewList: newClaimList, Empty: func() runtime.Object { return &v1.PersistentVolumeClaim{} }, Keeper: k, PageSize: testPage}
	out, err := lw.List(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.pages) != 4 || out == runtime.Object(p.pages[0]) {
		t.Fatalf("%d pages; the listing is a page: %v; want 4, false", len(p.pages), out == runtime.Object(p.pages[0]))
	}
	if got := out.(*v1.PersistentVolumeClaimList).Items; len(got) != 1 || got[0].Name != fmt.Sprint("c", testPage+1) {
		t.Errorf("the listing holds %d objects, want the one kept", len(got))
	}
	seen := k.Seen()
	if n := len(p.items); len(seen.base) != n || cap(seen.base) > n+n/32 {
		t.Errorf("Seen holds %d hashes in room for %d: want %d, sized once from the count", len(seen.base), cap(seen.base), n)
	}
}

// TestInformerThroughKeeper runs a real informer on the ListerWatcher: the
// store holds only what is kept, a claim no longer kept is deleted from it,
// and skipped events reach the reflector as bookmarks.
func TestInformerThroughKeeper(t *testing.T) {
	p := &pagedClaims{}
	fw := watch.NewFake()
	var watched []metav1.ListOptions
	var mu sync.Mutex
	k := claimKeeper()
	lw := &ListerWatcher{ListPage: TypedPages(p.list), NewList: newClaimList, Keeper: k, Empty: func() runtime.Object { return &v1.PersistentVolumeClaim{} },
		WatchAll: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			watched = append(watched, o)
			return fw, nil
		}}
	inf := cache.NewSharedIndexInformer(lw, &v1.PersistentVolumeClaim{}, 0, cache.Indexers{})
	var deleted []string
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		mu.Lock()
		defer mu.Unlock()
		deleted = append(deleted, obj.(*v1.PersistentVolumeClaim).Name)
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	ours := claim(map[string]string{annSP: driver}, nil, "")
	ours.ResourceVersion = "11"
	notOurs := named(claim(nil, nil, ""), "d", "u2")
	notOurs.ResourceVersion = "12"
	fw.Add(notOurs)
	fw.Add(ours)
	bound := ours.DeepCopy()
	bound.Spec.VolumeName, bound.ResourceVersion = "pv-1", "13"
	fw.Modify(bound)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(deleted) == 1 && inf.LastSyncResourceVersion() == "13", nil
	})
	if err != nil {
		t.Fatalf("deleted %v, last resourceVersion %q: want [c] and 13", deleted, inf.LastSyncResourceVersion())
	}
	if keys := inf.GetStore().ListKeys(); len(keys) != 0 {
		t.Errorf("store holds %v, want nothing", keys)
	}
	if !k.Seen().Has("pvc-u1") || !k.Seen().Has("pvc-u2") {
		t.Error("Seen misses a claim")
	}
	// A skipped event moves the reflector's resourceVersion on too.
	other := named(claim(nil, nil, ""), "e", "u3")
	other.ResourceVersion = "14"
	fw.Add(other)
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return inf.LastSyncResourceVersion() == "14", nil
	})
	if err != nil {
		t.Errorf("the skipped event's resourceVersion did not reach the reflector: %q", inf.LastSyncResourceVersion())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(watched) == 0 || (watched[0].SendInitialEvents != nil && *watched[0].SendInitialEvents) {
		t.Errorf("watch options %+v: want a plain watch after a listing", watched)
	}
}

// TestListerWatcherTransformsWhatItKeeps: a listing applies Transform to
// each object it keeps as it reads it, and to nothing it lets go.
func TestListerWatcherTransformsWhatItKeeps(t *testing.T) {
	p := &pagedClaims{}
	for i := range testPage + 5 {
		c := claim(nil, nil, "pv")
		if i%3 == 0 {
			c = claim(map[string]string{annSP: driver}, nil, "")
		}
		c.Name, c.UID = fmt.Sprint("c", i), types.UID(fmt.Sprint("u", i))
		c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		p.items = append(p.items, *c)
	}
	transformed := 0
	lw := &ListerWatcher{ListPage: TypedPages(p.list), NewList: newClaimList, Empty: func() runtime.Object { return &v1.PersistentVolumeClaim{} },
		Keeper: claimKeeper(), PageSize: testPage, Transform: func(obj any) (any, error) {
			transformed++
			obj.(*v1.PersistentVolumeClaim).ManagedFields = nil
			return obj, nil
		}}
	out, err := lw.List(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list := out.(*v1.PersistentVolumeClaimList)
	want := (testPage + 5 + 2) / 3
	if len(list.Items) != want || transformed != want {
		t.Fatalf("kept %d, transformed %d; want %d of each", len(list.Items), transformed, want)
	}
	for _, c := range list.Items {
		if c.ManagedFields != nil {
			t.Errorf("%s kept untransformed", c.Name)
		}
	}
}
