package binder

import (
	"sync"

	v1 "k8s.io/api/core/v1"
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

// Upsert keeps obj, an informer's, unless the store has a newer version; it
// returns the version the store now holds. Of the same version it keeps
// obj: when the informer brings the version that one of the binder's
// writes returned, its copy (which the informer's cache holds anyway,
// without managed fields) replaces the write's, so that each object is in
// memory once, not twice.
func (s *Store[T]) Upsert(obj T) T { return s.put(obj, true) }

// Returned keeps obj, which a write or a read of the binder's returned,
// unless the store has the same version or a newer one (the informer's
// copy of the same version is the one to keep). A claim is slimmed first,
// in place, as the informer's are (slim.go): obj is the caller's own
// copy, fresh from the API.
func (s *Store[T]) Returned(obj T) T {
	if c, ok := any(obj).(*v1.PersistentVolumeClaim); ok {
		slimClaim(shared, c)
	}
	return s.put(obj, false)
}

func (s *Store[T]) put(obj T, sameReplaces bool) T {
	k := storeKey(obj.GetNamespace(), obj.GetName())
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.objs[k]; ok && !replaces(obj.GetResourceVersion(), old.GetResourceVersion(), sameReplaces) {
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
