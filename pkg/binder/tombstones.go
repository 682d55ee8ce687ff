package binder

import "time"

// tombstones remember recently deleted objects, so that a write of ours
// that returns after the informer saw the deletion does not bring the
// object back into a cache. Not safe for concurrent use: the owning cache
// holds its lock.
//
// Records expire after tombstoneTTL. Each add sweeps the expired ones from
// the front of a queue kept in the order of the adds, so the records never
// outlive their TTL by more than the time to the next delete, at an
// amortised constant cost per delete.
type tombstones struct {
	byKey map[string]tomb
	order []queued // oldest first; may name keys already cleared or re-added
	now   func() time.Time
}

type tomb struct {
	rv string
	at time.Time
}

type queued struct {
	key string
	at  time.Time
}

// tombstoneTTL is far longer than any write round trip.
const tombstoneTTL = 5 * time.Minute

func (t *tombstones) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

func (t *tombstones) add(key, rv string) {
	if t.byKey == nil {
		t.byKey = map[string]tomb{}
	}
	now := t.clock()
	t.sweep(now)
	t.byKey[key] = tomb{rv: rv, at: now}
	t.order = append(t.order, queued{key: key, at: now})
}

// sweep drops the records older than the TTL. A queue entry whose key was
// re-added since is dropped without touching the newer record.
func (t *tombstones) sweep(now time.Time) {
	n := 0
	for n < len(t.order) && now.Sub(t.order[n].at) > tombstoneTTL {
		q := t.order[n]
		if d, ok := t.byKey[q.key]; ok && d.at.Equal(q.at) {
			delete(t.byKey, q.key)
		}
		n++
	}
	if n == 0 {
		return
	}
	clear(t.order[:n]) // let the strings go
	t.order = t.order[n:]
	if len(t.order) == 0 {
		t.order = nil // give the backing array back after a burst
	}
}

// len is the number of records held.
func (t *tombstones) len() int { return len(t.byKey) }

// buried reports whether an object version is older than, or as old as,
// its recorded deletion. A newer version (a new object under the same
// name) clears the record.
func (t *tombstones) buried(key, rv string) bool {
	d, ok := t.byKey[key]
	if !ok {
		return false
	}
	if t.clock().Sub(d.at) > tombstoneTTL {
		delete(t.byKey, key)
		return false
	}
	if newer(rv, d.rv) {
		delete(t.byKey, key)
		return false
	}
	return true
}
