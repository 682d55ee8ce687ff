package provisioner

import "sync"

// keyedMutex serialises work per key (a claim UID): the provisioning of a
// claim and the clean-up of its in-flight volume never interleave.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	sync.Mutex
	refs int
}

// lock waits for the key and returns its unlock.
func (k *keyedMutex) lock(key string) func() {
	l := k.ref(key)
	l.Lock()
	return func() { k.unlock(key, l) }
}

// tryLock takes the key if it is free: a worker that finds a claim busy
// (a CreateVolume of minutes) requeues it instead of waiting.
func (k *keyedMutex) tryLock(key string) (func(), bool) {
	l := k.ref(key)
	if !l.TryLock() {
		k.deref(key, l)
		return nil, false
	}
	return func() { k.unlock(key, l) }, true
}

func (k *keyedMutex) ref(key string) *keyLock {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.refs++
	return l
}

func (k *keyedMutex) unlock(key string, l *keyLock) {
	l.Unlock()
	k.deref(key, l)
}

func (k *keyedMutex) deref(key string, l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(k.locks, key)
	}
}
