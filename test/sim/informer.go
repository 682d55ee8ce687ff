package sim

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// informer stands for a SharedIndexInformer: its store is an indexer that
// the simulator fills only when the scheduler delivers an object, and its
// handlers are called then. Methods tether does not use are left to the
// nil embedded interface (they would panic).
type informer struct {
	cache.SharedIndexInformer
	indexer  cache.Indexer
	handlers []cache.ResourceEventHandler
}

func newInformer() *informer {
	return &informer{indexer: cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
}

type registration struct{}

func (registration) HasSynced() bool                                                { return true }
func (registration) HasSyncedChecker() cache.DoneChecker                            { return nil }
func (i *informer) GetStore() cache.Store                                           { return i.indexer }
func (i *informer) GetIndexer() cache.Indexer                                       { return i.indexer }
func (i *informer) HasSynced() bool                                                 { return true }
func (i *informer) AddIndexers(ix cache.Indexers) error                             { return i.indexer.AddIndexers(ix) }
func (i *informer) IsStopped() bool                                                 { return false }
func (i *informer) LastSyncResourceVersion() string                                 { return "" }
func (i *informer) SetTransform(cache.TransformFunc) error                          { return nil }
func (i *informer) RemoveEventHandler(cache.ResourceEventHandlerRegistration) error { return nil }
func (i *informer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	i.handlers = append(i.handlers, h)
	return registration{}, nil
}
func (i *informer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, _ time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(h)
}
func (i *informer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, _ cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(h)
}

// caches are one process's informers, one per resource, with the keys
// whose latest version the process has not seen yet.
type caches struct {
	w       *World
	inf     map[string]*informer
	pending map[string]map[string]bool
}

func newCaches(w *World, resources ...string) *caches {
	c := &caches{w: w, inf: map[string]*informer{}, pending: map[string]map[string]bool{}}
	for _, r := range resources {
		c.inf[r] = newInformer()
		c.pending[r] = map[string]bool{}
	}
	return c
}

// fill delivers every object of the API at once, as an informer's list
// does on start.
func (c *caches) fill() {
	for _, r := range sortedKeys(c.inf) {
		for _, k := range c.w.api.keys(r) {
			c.deliver(r, k)
		}
		clear(c.pending[r])
	}
}

func (c *caches) changed(resource, key string) {
	if p, ok := c.pending[resource]; ok {
		p[key] = true
	}
}

// deliver brings one object of the cache up to the API's version, and
// tells the handlers.
func (c *caches) deliver(resource, key string) {
	delete(c.pending[resource], key)
	inf := c.inf[resource]
	cur := c.w.api.peek(resource, key)
	old, exists, _ := inf.indexer.GetByKey(key)
	switch {
	case cur != nil:
		obj := cur.DeepCopyObject()
		if exists {
			_ = inf.indexer.Update(obj)
			for _, h := range inf.handlers {
				h.OnUpdate(old, obj)
			}
		} else {
			_ = inf.indexer.Add(obj)
			for _, h := range inf.handlers {
				h.OnAdd(obj, false)
			}
		}
	case exists:
		_ = inf.indexer.Delete(old)
		for _, h := range inf.handlers {
			h.OnDelete(old)
		}
	}
}

// pendingKeys lists resource/key pairs not yet delivered, sorted.
func (c *caches) pendingKeys() [][2]string {
	var out [][2]string
	for _, r := range sortedKeys(c.pending) {
		ks := make([]string, 0, len(c.pending[r]))
		for k := range c.pending[r] {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			out = append(out, [2]string{r, k})
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var _ runtime.Object = nil
