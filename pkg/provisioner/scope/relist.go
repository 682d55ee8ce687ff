package scope

import (
	"context"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Relist makes the informer on lw list again, through the Keeper, without
// a restart: it ends the watch under way with an Expired (410 Gone) error
// event, on which client-go's reflector lists anew (a watch that merely
// closes is started again from its resourceVersion, with no listing).
// Asked while a listing is under way, it ends the watch that follows that
// listing as soon as it starts: a listing serves Relist only if it began
// after it. So every decision the Keeper takes after Relist returns reads
// what Hold reads at that time or later (in node-deployment mode, the
// node's labels from the node lister), and an object Hold refused before
// is held now if Hold says so.
func (lw *ListerWatcher) Relist() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.stale = true
	if lw.current != nil {
		lw.current.expire()
	}
}

// listing records that a whole listing starts: it serves every Relist
// before it, and replaces a listing behind the watch that no watch has
// taken up yet.
func (lw *ListerWatcher) listing() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.stale, lw.listed, lw.rest = false, true, nil
	lw.gen++
}

// watching wraps a new watch so that Relist can end it, and hands it the
// rest of a listing behind the watch, if one waits.
func (lw *ListerWatcher) watching(ctx context.Context, w watch.Interface) watch.Interface {
	lw.mu.Lock()
	r, gen := lw.rest, lw.gen
	lw.rest = nil
	lw.mu.Unlock()
	var b *behindRead
	if r != nil {
		b = lw.readBehind(ctx, r)
	}
	kw := newKeptWatch(ctx, w, lw.filter, b, func() { lw.cut(gen) })
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.current = kw
	if lw.stale {
		kw.expire()
	}
	return kw
}

// cut records that a watch ended before the listing behind it caught up:
// unless a whole listing started since, the next watch ends at once, so
// that the reflector lists anew, whole.
func (lw *ListerWatcher) cut(gen int) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.gen == gen {
		lw.stale = true
	}
}

// expired is the event that ends a watch for Relist.
func expired() watch.Event {
	return watch.Event{Type: watch.Error, Object: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
		Message: "scope: a new listing is asked for (Relist)",
	}}
}

// keptWatch passes a watch's events through a filter (the Keeper's), and
// ends with an Expired error event when expire is called. Once it has
// passed that event or was stopped it calls the filter no more, so the
// Keeper is never told of a watch event during the listing that follows.
// With a listing behind it (behind), it passes the listing's objects the
// Keeper keeps as added, in between the watch's events; if it ends before
// the listing caught up, it calls cut.
type keptWatch struct {
	ctx    context.Context
	src    watch.Interface
	filter func(watch.Event) (watch.Event, bool)
	behind *behindRead
	cut    func()
	result chan watch.Event
	stop   chan struct{}
	ended  chan struct{}
	once   struct{ stop, ended sync.Once }
}

func newKeptWatch(ctx context.Context, src watch.Interface, filter func(watch.Event) (watch.Event, bool), behind *behindRead, cut func()) *keptWatch {
	w := &keptWatch{ctx: ctx, src: src, filter: filter, behind: behind, cut: cut,
		result: make(chan watch.Event), stop: make(chan struct{}), ended: make(chan struct{})}
	go w.run()
	return w
}

func (w *keptWatch) ResultChan() <-chan watch.Event { return w.result }

// Stop ends the watch; its result channel closes.
func (w *keptWatch) Stop() { w.once.stop.Do(func() { close(w.stop) }) }

func (w *keptWatch) expire() { w.once.ended.Do(func() { close(w.ended) }) }

func (w *keptWatch) run() {
	defer close(w.result)
	defer w.src.Stop()
	var items <-chan runtime.Object
	if w.behind != nil {
		items = w.behind.items
		defer w.behind.cancel()
		defer func() {
			if items != nil && w.cut != nil {
				w.cut()
			}
		}()
	}
	for {
		var (
			ev     watch.Event
			listed runtime.Object
		)
		select {
		case <-w.stop:
			return
		case <-w.ended:
			w.send(expired())
			return
		case obj, ok := <-items:
			if !ok {
				items = nil
				end := w.behind.done(w.ctx)
				if end.Type == watch.Error {
					w.cut()
					w.send(end)
					return
				}
				if !w.pass(end) {
					return
				}
				continue
			}
			listed = obj
		case e, ok := <-w.src.ResultChan():
			if !ok {
				return
			}
			ev = e
		}
		if w.endedNow() {
			// The event is dropped: the listing to come reads its object.
			w.send(expired())
			return
		}
		var (
			out  watch.Event
			pass bool
		)
		if listed != nil {
			out, pass = w.behind.backfill(listed)
		} else {
			out, pass = w.filter(ev)
			if w.behind != nil && pass {
				w.behind.note(ev)
			}
		}
		if pass && !w.pass(out) {
			return
		}
	}
}

// pass hands an event to the reader; false once the watch ends meanwhile
// (after the Expired event, when expire was called).
func (w *keptWatch) pass(ev watch.Event) bool {
	select {
	case w.result <- ev:
		return true
	case <-w.stop:
		return false
	case <-w.ended:
		w.send(expired())
		return false
	}
}

func (w *keptWatch) endedNow() bool {
	select {
	case <-w.ended:
		return true
	default:
		return false
	}
}

func (w *keptWatch) send(ev watch.Event) {
	select {
	case w.result <- ev:
	case <-w.stop:
	}
}

// RelistBackoff spaces the listings that changes of a node's labels ask
// for (Relist): the first at once, each next one at least a delay after
// the one before. The delay is Min after a listing that comes more than
// Max after the one before it (or is the first), and doubles, up to Max,
// after one that comes sooner. A label that flaps thus costs a listing
// per Max at most, once the delay has grown. The zero value is not
// usable: Min and Max must be positive, Min no more than Max.
type RelistBackoff struct {
	Min, Max time.Duration
	delay    time.Duration
	last     time.Time
}

// Wait is how long, from now, a listing must wait before it may start.
func (b *RelistBackoff) Wait(now time.Time) time.Duration {
	if b.last.IsZero() {
		return 0
	}
	return max(0, b.last.Add(b.delay).Sub(now))
}

// Started records a listing started at now.
func (b *RelistBackoff) Started(now time.Time) {
	if b.last.IsZero() || now.Sub(b.last) > b.Max {
		b.delay = b.Min
	} else {
		b.delay = min(2*b.delay, b.Max)
	}
	b.last = now
}
