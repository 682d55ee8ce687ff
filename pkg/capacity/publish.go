package capacity

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	storagev1client "k8s.io/client-go/kubernetes/typed/storage/v1"
)

// How a refresh brings the objects to the driver's answers. The publisher
// lists its objects once, then keeps a record of them from its own writes:
// a refresh in which nothing changed makes its GetCapacity calls and no
// API request at all (at 2,000 nodes and 3 classes the LIST of every poll
// returned 6,000 objects). The record is listed again after any write
// failed (the object may have changed or gone behind the publisher's back)
// and every relistEvery refreshes of everything, so that an object someone
// else deleted or changed is put right within that many poll periods.
// (external-provisioner watches its objects and sees that at once;
// tether's Role grants list, not watch.)
//
// Each object is written as soon as the driver's answer for it differs,
// up to writers writes at a time, while the next GetCapacity calls go on,
// Options.Threads at a time: a change shows a write's time after the
// driver told it, not after the whole round of calls.
const (
	relistEvery = 10
	writers     = 8
	// maxFailing GetCapacity calls in a row (in the order they return)
	// end a refresh: no further call starts (the driver is down, or each
	// call times out); a failing segment among answering ones does not.
	// The objects of failed calls are kept as they are.
	maxFailing = 3
)

// record is what the publisher knows of its objects, by entry key.
type record struct {
	mu      sync.Mutex
	objects map[string]*storagev1.CSIStorageCapacity
	listed  bool // objects come from a LIST and every write since
	fulls   int  // refreshes of everything since the LIST
}

func (r *record) get(k string) *storagev1.CSIStorageCapacity {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.objects[k]
}

func (r *record) set(k string, obj *storagev1.CSIStorageCapacity) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.objects[k] = obj
}

// drop forgets k's object if it is the one named.
func (r *record) drop(k, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o := r.objects[k]; o != nil && o.Name == name {
		delete(r.objects, k)
	}
}

// stale makes the next refresh list again.
func (r *record) stale() {
	r.mu.Lock()
	r.listed = false
	r.mu.Unlock()
}

func (r *record) snapshot() map[string]*storagev1.CSIStorageCapacity {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.objects)
}

// needsList reports whether a refresh lists the objects first: when the
// record is not a listed one, and on every relistEvery-th refresh of
// everything.
func needsList(listed bool, fulls int, full bool) bool {
	return !listed || (full && fulls >= relistEvery)
}

// want is the driver's answer for one (class, segment).
type want struct {
	entry
	capacity, maxSize *resource.Quantity
}

// pair is one (class, segment) to ask the driver about.
type pair struct {
	entry
	params map[string]string
}

// Sync makes the published objects match the driver's answers once.
func (p *Publisher) Sync(ctx context.Context) error {
	return p.sync(ctx, func(entry) bool { return true }, true)
}

// syncChanged does what Sync does, for the objects in the changed parts
// only: it asks the driver about those (class, segment) pairs alone.
func (p *Publisher) syncChanged(ctx context.Context, changes ...change) error {
	return p.sync(ctx, func(e entry) bool {
		return slices.ContainsFunc(changes, func(ch change) bool { return ch.covers(e) })
	}, false)
}

// sync makes the published objects for which in is true match the
// driver's answers; it leaves the others alone. full says in is true for
// every object.
func (p *Publisher) sync(ctx context.Context, in func(entry) bool, full bool) error {
	pairs, err := p.pairs(in)
	if err != nil {
		return err
	}
	w := &writes{p: p, sem: make(chan struct{}, writers)}
	if err := p.list(ctx, full, w); err != nil {
		return err
	}
	keys := map[string]bool{}
	for _, pr := range pairs {
		keys[pr.key()] = true
	}
	for k, obj := range obsolete(p.published.snapshot(), keys, in) {
		w.delete(ctx, k, obj)
	}
	c := &calls{sem: make(chan struct{}, p.threads())}
	for _, pr := range pairs {
		if !c.start(ctx) {
			break
		}
		c.wg.Go(func() {
			defer c.done()
			resp, err := p.o.Driver.GetCapacity(ctx, &csi.GetCapacityRequest{
				Parameters: pr.params, AccessibleTopology: &csi.Topology{Segments: pr.segment}})
			if !c.answered(ctx, pr, err) {
				return
			}
			wt := want{entry: pr.entry, capacity: resource.NewQuantity(max(resp.AvailableCapacity, 0), resource.BinarySI)}
			if m := resp.GetMaximumVolumeSize(); m != nil {
				wt.maxSize = resource.NewQuantity(max(m.Value, 0), resource.BinarySI)
			}
			k := pr.key()
			switch cur, obj := p.plan(p.published.get(k), wt); {
			case obj == nil:
			case cur == nil:
				w.create(ctx, k, obj)
			default:
				w.update(ctx, k, obj)
			}
		})
	}
	c.wg.Wait()
	errs := c.errs
	return errors.Join(append(errs, w.wait()...)...)
}

// list fills the record from a LIST when needsList says so; duplicates
// (two objects for one class and segment, left by a crash between a create
// and its record) are deleted.
func (p *Publisher) list(ctx context.Context, full bool, w *writes) error {
	r := &p.published
	r.mu.Lock()
	listed, fulls := r.listed, r.fulls
	if full {
		r.fulls++
	}
	r.mu.Unlock()
	if !needsList(listed, fulls, full) {
		return nil
	}
	sel := labels.SelectorFromSet(p.labels()).String()
	existing, err := p.o.Client.StorageV1().CSIStorageCapacities(p.o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return err
	}
	objects, dups := index(existing.Items)
	r.mu.Lock()
	r.objects, r.listed, r.fulls = objects, true, 0
	if full {
		r.fulls = 1
	}
	r.mu.Unlock()
	for _, d := range dups {
		w.delete(ctx, "", d)
	}
	return nil
}

// index keys listed objects by (class, segment); of two for one key it
// keeps the older (then the first by name) and returns the other among
// the duplicates.
func index(items []storagev1.CSIStorageCapacity) (map[string]*storagev1.CSIStorageCapacity, []*storagev1.CSIStorageCapacity) {
	out := map[string]*storagev1.CSIStorageCapacity{}
	var dups []*storagev1.CSIStorageCapacity
	for i := range items {
		obj := &items[i]
		k := entryOf(obj).key()
		cur, ok := out[k]
		if !ok {
			out[k] = obj
			continue
		}
		if older(obj, cur) {
			out[k], obj = obj, cur
		}
		dups = append(dups, obj)
	}
	return out, dups
}

func older(a, b *storagev1.CSIStorageCapacity) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func entryOf(obj *storagev1.CSIStorageCapacity) entry {
	return entry{class: obj.StorageClassName, segment: matchLabels(obj)}
}

// obsolete returns the recorded objects for which in is true whose
// (class, segment) is not among keys: their class or segment is gone.
func obsolete(objects map[string]*storagev1.CSIStorageCapacity, keys map[string]bool, in func(entry) bool) map[string]*storagev1.CSIStorageCapacity {
	out := map[string]*storagev1.CSIStorageCapacity{}
	for k, obj := range objects {
		if !keys[k] && in(entryOf(obj)) {
			out[k] = obj
		}
	}
	return out
}

// plan returns the object to write for w given the recorded one, cur (nil
// for none): nil when cur already says what w says and has the owner; a
// new object when cur is nil; else a copy of cur with w's sizes, and the
// owner added (as external-provisioner does: an object taken over from
// another owner does not go with that owner).
func (p *Publisher) plan(cur *storagev1.CSIStorageCapacity, w want) (*storagev1.CSIStorageCapacity, *storagev1.CSIStorageCapacity) {
	if cur == nil {
		obj := &storagev1.CSIStorageCapacity{
			ObjectMeta:       metav1.ObjectMeta{GenerateName: "csisc-", Labels: p.labels(), Namespace: p.o.Namespace},
			NodeTopology:     &metav1.LabelSelector{MatchLabels: maps.Clone(w.segment)},
			StorageClassName: w.class, Capacity: w.capacity, MaximumVolumeSize: w.maxSize,
		}
		if p.o.Owner != nil {
			obj.OwnerReferences = []metav1.OwnerReference{*p.o.Owner}
		}
		return nil, obj
	}
	owned := p.o.Owner == nil || slices.ContainsFunc(cur.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == p.o.Owner.UID })
	if owned && sameQuantity(cur.Capacity, w.capacity) && sameQuantity(cur.MaximumVolumeSize, w.maxSize) {
		return cur, nil
	}
	obj := cur.DeepCopy()
	obj.Capacity, obj.MaximumVolumeSize = w.capacity, w.maxSize
	if !owned {
		obj.OwnerReferences = append(obj.OwnerReferences, *p.o.Owner)
	}
	return cur, obj
}

// calls runs a refresh's GetCapacity calls, up to cap(sem) at a time, and
// stops starting them after maxFailing failures in a row.
type calls struct {
	sem     chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	failing int
	stopped bool
	errs    []error
}

// start waits for a free slot; false when none is to be taken: ctx ended
// or too many calls failed.
func (c *calls) start(ctx context.Context) bool {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		<-c.sem
		return false
	}
	return true
}

// done frees the slot of a call, after answered has counted it.
func (c *calls) done() { <-c.sem }

// answered counts a call's result; true when it succeeded.
func (c *calls) answered(ctx context.Context, pr pair, err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.failing = 0
		return true
	}
	c.errs = append(c.errs, fmt.Errorf("GetCapacity for class %s in %v: %w", pr.class, pr.segment, err))
	if c.failing++; !c.stopped && (c.failing >= maxFailing || ctx.Err() != nil) {
		c.stopped = true
		c.errs = append(c.errs, fmt.Errorf("%d GetCapacity calls failed in a row: the rest waits for the next refresh", c.failing))
	}
	return false
}

// writes runs a refresh's API writes, up to cap(sem) at a time, and keeps
// the record up to date with their results.
type writes struct {
	p    *Publisher
	sem  chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

func (w *writes) do(ctx context.Context, write func(context.Context) error) {
	select {
	case w.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	w.wg.Go(func() {
		defer func() { <-w.sem }()
		if err := write(ctx); err != nil {
			w.p.published.stale()
			w.mu.Lock()
			w.errs = append(w.errs, err)
			w.mu.Unlock()
		}
	})
}

func (w *writes) create(ctx context.Context, k string, obj *storagev1.CSIStorageCapacity) {
	w.do(ctx, func(ctx context.Context) error {
		created, err := w.p.api().Create(ctx, obj, metav1.CreateOptions{})
		if err == nil {
			w.p.published.set(k, created)
		}
		return err
	})
}

func (w *writes) update(ctx context.Context, k string, obj *storagev1.CSIStorageCapacity) {
	w.do(ctx, func(ctx context.Context) error {
		updated, err := w.p.api().Update(ctx, obj, metav1.UpdateOptions{})
		if err == nil {
			w.p.published.set(k, updated)
		}
		return err
	})
}

// delete deletes obj, and forgets it as k's object.
func (w *writes) delete(ctx context.Context, k string, obj *storagev1.CSIStorageCapacity) {
	w.do(ctx, func(ctx context.Context) error {
		err := w.p.api().Delete(ctx, obj.Name, metav1.DeleteOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			w.p.published.drop(k, obj.Name)
			return nil
		}
		return err
	})
}

// wait waits for the writes and returns their errors.
func (w *writes) wait() []error {
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errs
}

func (p *Publisher) api() storagev1client.CSIStorageCapacityInterface {
	return p.o.Client.StorageV1().CSIStorageCapacities(p.o.Namespace)
}

func (p *Publisher) labels() map[string]string {
	return map[string]string{LabelDriverName: p.o.Driver.DriverName(), LabelManagedBy: p.o.ManagedBy}
}

func matchLabels(obj *storagev1.CSIStorageCapacity) map[string]string {
	if obj.NodeTopology == nil {
		return nil
	}
	return obj.NodeTopology.MatchLabels
}

func sameQuantity(a, b *resource.Quantity) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Cmp(*b) == 0
}

// pairs lists every (class, segment) for which in is true: the driver's
// delayed classes (and Immediate ones with ImmediateBinding) in every
// segment their allowedTopologies admit.
func (p *Publisher) pairs(in func(entry) bool) ([]pair, error) {
	segments, err := p.o.Segments()
	if err != nil {
		return nil, fmt.Errorf("topology segments: %w", err)
	}
	classes, err := p.o.Classes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []pair
	for _, class := range classes {
		if class.Provisioner != p.o.Driver.DriverName() {
			continue
		}
		delayed := class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
		if !delayed && !p.o.ImmediateBinding {
			continue
		}
		params, err := p.o.DriverParams(class.Parameters)
		if err != nil {
			continue // the provisioner reports a bad class when it is used
		}
		for _, seg := range segments {
			if !admits(class.AllowedTopologies, seg) {
				continue
			}
			if e := (entry{class: class.Name, segment: seg}); in(e) {
				out = append(out, pair{entry: e, params: params})
			}
		}
	}
	return out, nil
}
