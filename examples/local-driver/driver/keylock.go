package driver

import (
	"context"
	"sync"
)

// keyLocks serialises work per key (a volume ID): at most one holder per
// key, others wait their turn or give up when their context ends. Entries
// exist only while held or awaited, so the map does not grow with the
// number of volumes ever seen.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	token   chan struct{} // holds one value while the key is free
	waiters int           // holders plus waiters; the entry goes at zero
}

func newKeyLocks() *keyLocks { return &keyLocks{m: map[string]*keyLock{}} }

// lock takes key, waiting while another caller holds it. It returns the
// function that releases the key, or ctx's error if ctx ends first.
func (k *keyLocks) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	l := k.m[key]
	if l == nil {
		l = &keyLock{token: make(chan struct{}, 1)}
		l.token <- struct{}{}
		k.m[key] = l
	}
	l.waiters++
	k.mu.Unlock()

	select {
	case <-l.token:
		return func() { l.token <- struct{}{}; k.done(key, l) }, nil
	case <-ctx.Done():
		k.done(key, l)
		return nil, ctx.Err()
	}
}

func (k *keyLocks) done(key string, l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l.waiters--
	if l.waiters == 0 {
		delete(k.m, key)
	}
}

// size reports how many keys are held or awaited (for tests).
func (k *keyLocks) size() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}
