package scope

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// FirstPage is how many objects the first page of a listing behind the
// watch holds (ListerWatcher.Behind): what the informer holds when it
// syncs.
const FirstPage = 500

// restOfListing is what is left of a listing behind the watch after its first
// page: the pages from cont on, all at the first page's resourceVersion.
type restOfListing struct {
	rv, cont string
	start    time.Time
	pages    int
	kept     int
}

// listFirstPage lists the first page of a listing behind the watch and
// returns what the Keeper keeps of it, at the page's resourceVersion; the
// rest waits for the watch that follows (watching).
func (lw *ListerWatcher) listFirstPage(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	start := time.Now()
	lw.listing()
	size := lw.FirstPageSize
	if size <= 0 {
		size = FirstPage
	}
	opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit, opts.Continue = "", "", size, ""
	lw.Keeper.Behind()
	var kept []runtime.Object
	lm, err := lw.ListPage(ctx, opts, func(obj runtime.Object) {
		if lw.Keeper.Backfill(obj) == Keep {
			kept = append(kept, lw.transform(obj))
		}
	})
	if err != nil {
		lw.mu.Lock()
		lw.listed = false // the next listing is a first one again
		lw.mu.Unlock()
		return nil, err
	}
	r := &restOfListing{rv: lm.ResourceVersion, cont: lm.Continue, start: start, pages: 1, kept: len(kept)}
	lw.mu.Lock()
	if r.cont != "" {
		lw.rest = r
	}
	lw.mu.Unlock()
	if r.cont == "" {
		lw.Keeper.CaughtUp()
		lw.logListed(ctx, r, true)
	}
	return lw.listOf(kept, r.rv)
}

// transform is the ListerWatcher's Transform of a kept object (the object
// as read when it fails: the informer's transform meets it again and
// reports it).
func (lw *ListerWatcher) transform(obj runtime.Object) runtime.Object {
	if lw.Transform == nil {
		return obj
	}
	if t, err := lw.Transform(obj); err == nil {
		if o, ok := t.(runtime.Object); ok {
			return o
		}
	}
	return obj
}

func (lw *ListerWatcher) logListed(ctx context.Context, r *restOfListing, caughtUp bool) {
	klog.FromContext(ctx).V(1).Info("Listed behind the watch", "resource", lw.Resource, "listed", lw.Keeper.listed(),
		"kept", r.kept, "pages", r.pages, "resourceVersion", r.rv, "caughtUp", caughtUp, "duration", time.Since(r.start).Round(time.Millisecond))
}

// behindRead reads the rest of a listing behind the watch into a watch
// of it: its objects come, one at a time, on items; err says why items
// closed early (nil once every page is read).
type behindRead struct {
	lw     *ListerWatcher
	r      *restOfListing
	items  chan runtime.Object
	err    error
	cancel context.CancelFunc
	// last is the resourceVersion of the watch's latest event (the
	// listing's, before the first): a bookmark of it follows the listing's
	// end, since the objects it added carry older ones.
	last string
}

func (lw *ListerWatcher) readBehind(ctx context.Context, r *restOfListing) *behindRead {
	ctx, cancel := context.WithCancel(ctx)
	b := &behindRead{lw: lw, r: r, items: make(chan runtime.Object, 64), cancel: cancel, last: r.rv}
	size := lw.PageSize
	if size <= 0 {
		size = PageSize
	}
	go func() {
		defer close(b.items)
		if lw.BehindAfter != nil {
			if err := lw.BehindAfter(ctx); err != nil {
				b.err = err
				return
			}
		}
		opts := metav1.ListOptions{Limit: size, Continue: r.cont}
		for opts.Continue != "" {
			lm, err := lw.ListPage(ctx, opts, func(obj runtime.Object) {
				select {
				case b.items <- obj:
				case <-ctx.Done():
				}
			})
			if err == nil && ctx.Err() != nil {
				err = ctx.Err()
			}
			if err != nil {
				b.err = err
				return
			}
			r.pages++
			opts.Continue = lm.Continue
		}
	}()
	return b
}

// note records the resourceVersion of a watch event passed on.
func (b *behindRead) note(ev watch.Event) {
	if ev.Type == watch.Error {
		return
	}
	if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
		b.last = m.GetResourceVersion()
	}
}

// backfill hands the listing's next object to the Keeper: an Added event
// if it keeps it.
func (b *behindRead) backfill(obj runtime.Object) (watch.Event, bool) {
	if b.lw.Keeper.Backfill(obj) != Keep {
		return watch.Event{}, false
	}
	b.r.kept++
	return watch.Event{Type: watch.Added, Object: obj}, true
}

// done ends the listing once items has closed: caught up, a bookmark of
// the watch's latest resourceVersion; cut short, an Expired error event,
// on which the reflector lists anew, whole.
func (b *behindRead) done(ctx context.Context) watch.Event {
	if b.err != nil {
		klog.FromContext(ctx).Info("A listing behind the watch was cut short: listing again, whole", "resource", b.lw.Resource, "pages", b.r.pages, "err", b.err)
		ev := expired()
		ev.Object.(*metav1.Status).Message = fmt.Sprintf("scope: the listing behind the watch failed: %v", b.err)
		return ev
	}
	b.lw.Keeper.CaughtUp()
	b.lw.logListed(ctx, b.r, true)
	mark := b.lw.Empty()
	mm, _ := meta.Accessor(mark)
	mm.SetResourceVersion(b.last)
	return watch.Event{Type: watch.Bookmark, Object: mark}
}
