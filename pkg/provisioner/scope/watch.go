package scope

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// PageSize is how many objects one page of a listing holds: a listing is
// read a page at a time and only what is kept stays in memory.
const PageSize = 500

// ListerWatcher is a resource's lister and watcher through a Keeper: its
// listings and watches carry only what the Keeper keeps (and a deletion
// for what it stops keeping), so an informer built on it holds nothing
// else. It lists in pages of PageSize at the API server's current state
// (resourceVersion unset: from Kubernetes 1.34 the watch cache serves such
// pages, where resourceVersion=0 would be answered whole), and never streams
// its listings (watch-list), so that no page holds more than PageSize
// objects.
type ListerWatcher struct {
	// ListPage lists one page; WatchAll watches: the resource's own calls.
	ListPage func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	WatchAll func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	// Empty returns a new object of the resource, for the bookmarks that
	// stand for the events the Keeper skips.
	Empty  func() runtime.Object
	Keeper *Keeper

	// mu guards stale (a Relist no listing has served yet) and current
	// (the last watch started).
	mu      sync.Mutex
	stale   bool
	current *keptWatch
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
// read at that version).
func (lw *ListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	lw.listing()
	opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit, opts.Continue = "", "", PageSize, ""
	var (
		kept []runtime.Object
		all  []runtime.Object
		out  runtime.Object
	)
	for {
		page, err := lw.ListPage(ctx, opts)
		if err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(page)
		if err != nil {
			return nil, err
		}
		all = append(all[:0], items...)
		keep := lw.Keeper.relistPage(all, out == nil)
		for i, obj := range all {
			if keep[i] {
				// A copy: the page's other objects are not held by it.
				kept = append(kept, obj.DeepCopyObject())
			}
		}
		lm, err := meta.ListAccessor(page)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = page
		}
		if opts.Continue = lm.GetContinue(); opts.Continue == "" {
			break
		}
	}
	lw.Keeper.relistDone()
	if err := meta.SetList(out, kept); err != nil {
		return nil, err
	}
	lm, _ := meta.ListAccessor(out)
	lm.SetContinue("")
	lm.SetRemainingItemCount(nil)
	return out, nil
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
	return lw.watching(w), nil
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
