package libv8

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// CopyingVolumes wraps the PV informer that the library's controller uses
// so that the PVs it reads from the store are copies. The library (v8)
// changes the PV it reads in place before it writes it (the deletion
// finalizer, added or removed): on the shared informer's own object that
// is a data race with every other reader of the cache, and when the write
// fails the cache keeps the change the server refused, so the library's
// retry sees "no finalizer, being deleted" and skips the volume until the
// next resync, leaving the PV Terminating meanwhile.
//
// It also keeps the handlers added through it (the library's), so that a
// PV can be handed back to the library without a change of the PV
// (Requeue).
func CopyingVolumes(inf cache.SharedIndexInformer) *Volumes {
	return &Volumes{SharedIndexInformer: inf}
}

// Volumes is the PV informer as the library sees it (CopyingVolumes).
type Volumes struct {
	cache.SharedIndexInformer
	kept handlers
}

func (i *Volumes) GetStore() cache.Store {
	return copyingStore{i.SharedIndexInformer.GetStore()}
}

func (i *Volumes) keep(h cache.ResourceEventHandler) {
	i.kept.add(h)
}

func (i *Volumes) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	i.keep(h)
	return i.SharedIndexInformer.AddEventHandler(h)
}

func (i *Volumes) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	i.keep(h)
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync)
}

func (i *Volumes) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	i.keep(h)
	return i.SharedIndexInformer.AddEventHandlerWithOptions(h, o)
}

// Requeue hands the named PV, as the store holds it, to the handlers added
// through i as an update without change: the library queues it and looks
// at it again (a PV whose deletion waited for a detach). A PV not in the
// store is left alone.
func (i *Volumes) Requeue(name string) {
	i.kept.requeue(i.SharedIndexInformer.GetStore(), name)
}

// copyingStore hands out deep copies of what it holds. Writes go through,
// but for one: the library adds the PV it has just saved as it sent it,
// without the server's resourceVersion, UID or anything set since; when
// the watch delivered the saved PV first, that copy would replace it until
// the PV's next event, and the library's next write from it (the
// finalizer's removal on a Retain PV) would go out without a
// precondition. A PV without a resourceVersion is stored only when the
// store has none of that name yet (the library's guard against making the
// volume twice before the watch catches up).
type copyingStore struct{ cache.Store }

func (s copyingStore) Add(obj any) error    { return s.write(obj, s.Store.Add) }
func (s copyingStore) Update(obj any) error { return s.write(obj, s.Store.Update) }

func (s copyingStore) write(obj any, write func(any) error) error {
	if m, err := meta.Accessor(obj); err == nil && m.GetResourceVersion() == "" {
		if _, exists, err := s.Store.Get(obj); err == nil && exists {
			return nil
		}
	}
	return write(obj)
}

func copyOf(obj any) any {
	if o, ok := obj.(runtime.Object); ok {
		return o.DeepCopyObject()
	}
	return obj
}

func (s copyingStore) List() []any {
	objs := s.Store.List()
	out := make([]any, len(objs))
	for i, o := range objs {
		out[i] = copyOf(o)
	}
	return out
}

func (s copyingStore) Get(obj any) (any, bool, error) {
	item, exists, err := s.Store.Get(obj)
	return copyOf(item), exists, err
}

func (s copyingStore) GetByKey(key string) (any, bool, error) {
	item, exists, err := s.Store.GetByKey(key)
	return copyOf(item), exists, err
}
