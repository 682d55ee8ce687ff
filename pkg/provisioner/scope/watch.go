package scope

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// PageSize is how many objects one page of a listing holds. A page is
// read one object at a time (StreamPages), so its size costs the process
// nothing; the API server's watch cache serves a listing in fewer, larger
// pages with far less work (see StreamPages).
const PageSize = 10000

// ListerWatcher is a resource's lister and watcher through a Keeper: its
// listings and watches carry only what the Keeper keeps (and a deletion
// for what it stops keeping), so an informer built on it holds nothing
// else. It lists in pages of PageSize at the API server's current state
// (resourceVersion unset: from Kubernetes 1.34 the watch cache serves such
// pages, where resourceVersion=0 would be answered whole), takes each
// page's objects one at a time as they are read, and never streams its
// listings as a watch (watch-list: off by default in the API servers of
// Kubernetes 1.33 on).
type ListerWatcher struct {
	// ListPage lists one page; WatchAll watches: the resource's own calls.
	ListPage PageReader
	WatchAll func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	// NewList returns an empty list of the resource, for the listings it
	// returns; Empty a new object of the resource, for the bookmarks that
	// stand for the events the Keeper skips.
	NewList func() runtime.Object
	Empty   func() runtime.Object
	Keeper  *Keeper
	// PageSize, if set, is the pages' size instead of PageSize;
	// FirstPageSize, the first page's of a listing behind the watch
	// instead of FirstPage.
	PageSize, FirstPageSize int64
	// Resource names the resource in the log line of each listing.
	Resource string
	// Transform, if set, is applied to each kept object as a listing reads
	// it, so that a listing of many kept objects does not hold them
	// untransformed until the informer takes the whole listing. It must
	// be safe to apply twice: the informer applies its own again.
	Transform cache.TransformFunc
	// Behind, if set, makes the first listing one behind the watch
	// (Keeper.Behind): List returns its first page (FirstPage objects) at
	// once, so the informer syncs on it, and the watch that follows reads
	// the rest of its pages at the same resourceVersion, handing each
	// object to the Keeper's Backfill in between its own events, and those
	// kept to the informer as added. Until it has caught up the Keeper's
	// Seen is open. A watch that ends before that, or a page that fails,
	// makes the reflector list anew, whole. Later listings are whole.
	Behind bool
	// BehindAfter, if set, is waited for before the rest of a listing
	// behind the watch is read (its first page and the watch are not): a
	// PV listing waits for the claims', so that a claim that waits since
	// before the start, which comes only with its listing, is read
	// without sharing the API server with the PVs' pages. An error cuts
	// the listing short (a whole one follows).
	BehindAfter func(ctx context.Context) error

	// mu guards stale (a Relist no listing has served yet), current (the
	// last watch started), listed (a listing was served), rest (the rest
	// of a listing behind the watch, for the next watch to read) and gen
	// (the count of listings started).
	mu      sync.Mutex
	stale   bool
	current *keptWatch
	listed  bool
	rest    *restOfListing
	gen     int
}

var (
	_ cache.ListerWatcherWithContext = &ListerWatcher{}
	_ cache.ListerWatcher            = &ListerWatcher{}
)

// List is ListWithContext without a context.
func (lw *ListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch is WatchWithContext without a context.
func (lw *ListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported keeps the reflector on list and watch.
func (lw *ListerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// ListWithContext lists every page and returns what the Keeper keeps, as one
// listing at the first page's resourceVersion (every page of a listing is
// read at that version). Each object is taken as it is read: what is kept
// is held, the rest let go.
func (lw *ListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if lw.Behind && !lw.listedOnce() {
		return lw.listFirstPage(ctx, opts)
	}
	lw.listing()
	start := time.Now()
	size := lw.PageSize
	if size <= 0 {
		size = PageSize
	}
	opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit, opts.Continue = "", "", size, ""
	lw.Keeper.relistBegin()
	var (
		kept []runtime.Object
		rv   string
	)
	keep := func(obj runtime.Object) {
		if lw.Keeper.relistOne(obj) {
			kept = append(kept, lw.transform(obj))
		}
	}
	pages := 0
	for first := true; ; first = false {
		lm, err := lw.ListPage(ctx, opts, keep)
		if err != nil {
			return nil, err
		}
		pages++
		if first {
			rv = lm.ResourceVersion
			if rest := lm.RemainingItemCount; rest != nil && *rest > 0 {
				lw.Keeper.relistExpect(lw.Keeper.listed() + int(*rest))
			}
		}
		if opts.Continue = lm.Continue; opts.Continue == "" {
			break
		}
	}
	listed := lw.Keeper.listed()
	lw.Keeper.relistDone()
	// A listing after the first is a watch that could not resume (or a
	// Relist): worth a line, as it costs the API server and this process
	// the whole resource again.
	klog.FromContext(ctx).V(1).Info("Listed", "resource", lw.Resource, "listed", listed,
		"kept", len(kept), "pages", pages, "resourceVersion", rv, "duration", time.Since(start).Round(time.Millisecond))
	return lw.listOf(kept, rv)
}

// listOf is a list of the resource holding objs, at resourceVersion rv.
func (lw *ListerWatcher) listOf(objs []runtime.Object, rv string) (runtime.Object, error) {
	out := lw.NewList()
	if err := meta.SetList(out, objs); err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(out)
	if err != nil {
		return nil, err
	}
	lm.SetResourceVersion(rv)
	return out, nil
}

func (lw *ListerWatcher) listedOnce() bool {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.listed
}

// WatchWithContext watches through the Keeper: kept objects pass as they
// are, one no longer kept passes as a deletion, and a skipped event
// passes as a bookmark of its resourceVersion. Relist ends it.
func (lw *ListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		return nil, fmt.Errorf("scope: a watch with initial events is not supported")
	}
	w, err := lw.WatchAll(ctx, opts)
	if err != nil {
		return nil, err
	}
	return lw.watching(ctx, w), nil
}

func (lw *ListerWatcher) filter(ev watch.Event) (watch.Event, bool) {
	var a Action
	switch ev.Type {
	case watch.Added:
		a = lw.Keeper.Added(ev.Object)
	case watch.Modified:
		a = lw.Keeper.Modified(ev.Object)
	case watch.Deleted:
		a = lw.Keeper.Deleted(ev.Object)
	default: // bookmarks and errors
		return ev, true
	}
	switch a {
	case Keep:
		return ev, true
	case Forget:
		return watch.Event{Type: watch.Deleted, Object: ev.Object}, true
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return ev, false
	}
	mark := lw.Empty()
	mm, _ := meta.Accessor(mark)
	mm.SetResourceVersion(m.GetResourceVersion())
	return watch.Event{Type: watch.Bookmark, Object: mark}, true
}
