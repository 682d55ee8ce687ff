package server

import (
	"container/list"
	"sync"
	"time"
)

// entryOverhead is what an entry of a ttlCache costs besides the bytes
// its sizeOf counts, an upper estimate: its map slot and list element,
// a key of up to 32 bytes, its expiry, and the headers of the value's
// strings, slices and maps.
const entryOverhead = 256

// ttlCache remembers values for ttl after they are put, within maxBytes:
// the sum over its entries of entryOverhead plus sizeOf of the value.
// Every entry lives ttl from its put, so entries expire in the order they
// were put (for the nondecreasing times its callers give): put and get
// drop the expired entries, oldest first; put then drops the oldest ones
// until the new entry fits, and keeps none that is larger than maxBytes
// alone. get never answers an expired entry. Safe for concurrent use.
type ttlCache[K comparable, V any] struct {
	ttl      time.Duration
	maxBytes int
	sizeOf   func(V) int

	mu      sync.Mutex
	entries map[K]*list.Element // each holds a *cached[K, V]
	order   list.List           // the entries, oldest first
	bytes   int                 // held, as counted for maxBytes
}

type cached[K comparable, V any] struct {
	key   K
	value V
	size  int
	until time.Time
}

func newTTLCache[K comparable, V any](ttl time.Duration, maxBytes int, sizeOf func(V) int) *ttlCache[K, V] {
	return &ttlCache[K, V]{ttl: ttl, maxBytes: maxBytes, sizeOf: sizeOf, entries: map[K]*list.Element{}}
}

// get is key's value, false when there is none or it expired by now.
func (c *ttlCache[K, V]) get(key K, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropExpired(now)
	if e, ok := c.entries[key]; ok {
		if entry := e.Value.(*cached[K, V]); now.Before(entry.until) {
			return entry.value, true
		}
	}
	var zero V
	return zero, false
}

// put remembers value for key until now plus the cache's ttl, in place of
// any value key had.
func (c *ttlCache[K, V]) put(key K, value V, now time.Time) {
	size := entryOverhead + c.sizeOf(value)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.remove(e)
	}
	c.dropExpired(now)
	if size > c.maxBytes {
		return
	}
	for c.bytes+size > c.maxBytes {
		c.remove(c.order.Front())
	}
	c.entries[key] = c.order.PushBack(&cached[K, V]{key: key, value: value, size: size, until: now.Add(c.ttl)})
	c.bytes += size
}

// dropExpired removes the oldest entries while they are expired by now.
func (c *ttlCache[K, V]) dropExpired(now time.Time) {
	for e := c.order.Front(); e != nil && !now.Before(e.Value.(*cached[K, V]).until); e = c.order.Front() {
		c.remove(e)
	}
}

func (c *ttlCache[K, V]) remove(e *list.Element) {
	entry := c.order.Remove(e).(*cached[K, V])
	delete(c.entries, entry.key)
	c.bytes -= entry.size
}

// held is the number of entries and the bytes they count, expired or not.
func (c *ttlCache[K, V]) held() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.bytes
}
