package binder

import "time"

// tombstones remember recently deleted objects, so that a write of ours
// that returns after the informer saw the deletion does not bring the
// object back into a cache. Not safe for concurrent use: the owning cache
// holds its lock.
type tombstones struct {
	byKey map[string]tomb
	adds  int
}

type tomb struct {
	rv string
	at time.Time
}

// tombstoneTTL is far longer than any write round trip.
const tombstoneTTL = 5 * time.Minute

func (t *tombstones) add(key, rv string) {
	if t.byKey == nil {
		t.byKey = map[string]tomb{}
	}
	now := time.Now()
	t.byKey[key] = tomb{rv: rv, at: now}
	if t.adds++; t.adds%1024 == 0 {
		for k, v := range t.byKey {
			if now.Sub(v.at) > tombstoneTTL {
				delete(t.byKey, k)
			}
		}
	}
}

// buried reports whether an object version is older than, or as old as,
// its recorded deletion. A newer version (a new object under the same
// name) clears the record.
func (t *tombstones) buried(key, rv string) bool {
	d, ok := t.byKey[key]
	if !ok {
		return false
	}
	if newer(rv, d.rv) {
		delete(t.byKey, key)
		return false
	}
	return true
}
