package claimlock

import "sync"

// Set holds a lock per key (a claim UID). Its zero value is ready to use.
type Set struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	sync.Mutex
	refs int
}

// Lock waits for the key and returns its unlock.
func (k *Set) Lock(key string) func() {
	l := k.ref(key)
	l.Lock()
	return func() { k.unlock(key, l) }
}

// TryLock takes the key if it is free: a worker that finds a claim busy
// (a CreateVolume of minutes) requeues it instead of waiting.
func (k *Set) TryLock(key string) (func(), bool) {
	l := k.ref(key)
	if !l.TryLock() {
		k.deref(key, l)
		return nil, false
	}
	return func() { k.unlock(key, l) }, true
}

func (k *Set) ref(key string) *keyLock {
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

func (k *Set) unlock(key string, l *keyLock) {
	l.Unlock()
	k.deref(key, l)
}

func (k *Set) deref(key string, l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(k.locks, key)
	}
}
