package scope

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Gone remembers the UIDs of the last objects whose deletion a watch
// delivered, up to its capacity, the oldest forgotten first. The API
// server never gives a UID to a second object, so a reader that finds a
// UID here knows without asking that its object no longer exists; one
// that does not (never seen go, or forgotten for room) asks the API
// server as before. It is safe for concurrent use.
type Gone struct {
	mu   sync.Mutex
	ring []types.UID
	next int
	set  map[types.UID]struct{}
}

// NewGone returns an empty Gone that holds at most capacity UIDs.
func NewGone(capacity int) *Gone {
	return &Gone{ring: make([]types.UID, capacity), set: map[types.UID]struct{}{}}
}

// Add remembers uid, forgetting the oldest UID when full.
func (g *Gone) Add(uid types.UID) {
	if g == nil || len(g.ring) == 0 || uid == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.set[uid]; ok {
		return
	}
	if old := g.ring[g.next]; old != "" {
		delete(g.set, old)
	}
	g.ring[g.next] = uid
	g.set[uid] = struct{}{}
	g.next = (g.next + 1) % len(g.ring)
}

// Has reports whether uid's deletion was seen and is still remembered.
func (g *Gone) Has(uid types.UID) bool {
	if g == nil || uid == "" {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.set[uid]
	return ok
}
