package libv8

import (
	"slices"
	"sync"

	"k8s.io/client-go/tools/cache"
)

// handlers are the event handlers added through an informer wrapper (the
// library's), kept so that an object can be handed back to them without a
// change of the object.
type handlers struct {
	mu   sync.Mutex
	list []cache.ResourceEventHandler
}

// add keeps h and returns it.
func (k *handlers) add(h cache.ResourceEventHandler) cache.ResourceEventHandler {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.list = append(k.list, h)
	return h
}

// requeue hands the object of the key, as store holds it, to every handler
// kept as an update without change, each a copy of its own: the library
// queues it and looks at it again. An object not in the store is left
// alone.
func (k *handlers) requeue(store cache.Store, key string) {
	obj, exists, err := store.GetByKey(key)
	if err != nil || !exists {
		return
	}
	k.mu.Lock()
	list := slices.Clone(k.list)
	k.mu.Unlock()
	for _, h := range list {
		h.OnUpdate(copyOf(obj), copyOf(obj))
	}
}
