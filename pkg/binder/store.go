package binder

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Store keeps the newest known version of each object by namespace/name,
// fed by the informer and by the binder's own writes, whichever is newer.
type Store[T metav1.Object] struct {
	mu   sync.RWMutex
	objs map[string]T
	dead tombstones
}

// NewStore returns an empty store.
func NewStore[T metav1.Object]() *Store[T] {
	return &Store[T]{objs: map[string]T{}}
}

func storeKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Upsert keeps obj unless the store has a newer version; it returns the
// version the store now holds.
func (s *Store[T]) Upsert(obj T) T {
	k := storeKey(obj.GetNamespace(), obj.GetName())
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.objs[k]; ok && !newer(obj.GetResourceVersion(), old.GetResourceVersion()) {
		return old
	}
	if s.dead.buried(k, obj.GetResourceVersion()) {
		return obj
	}
	s.objs[k] = obj
	return obj
}

// Delete forgets the object, unless the store holds a different UID (a new
// object under the same name that was already seen).
func (s *Store[T]) Delete(obj T) {
	k := storeKey(obj.GetNamespace(), obj.GetName())
	s.mu.Lock()
	defer s.mu.Unlock()
	rv := obj.GetResourceVersion()
	if old, ok := s.objs[k]; ok && old.GetUID() == obj.GetUID() {
		if newer(old.GetResourceVersion(), rv) {
			rv = old.GetResourceVersion() // a relist's last-known state can be older than our own write
		}
		delete(s.objs, k)
	}
	s.dead.add(k, rv)
}

// Get returns the newest version of namespace/name.
func (s *Store[T]) Get(namespace, name string) (T, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	obj, ok := s.objs[storeKey(namespace, name)]
	return obj, ok
}

// List returns every object, in no order.
func (s *Store[T]) List() []T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]T, 0, len(s.objs))
	for _, o := range s.objs {
		out = append(out, o)
	}
	return out
}
