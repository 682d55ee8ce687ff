package scope

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"
)

// Seen holds names of objects a cache does not keep whole, as 64-bit
// hashes counted per object: Has answers true for every name added and
// not removed since (and, rarely, for another name of the same hash,
// which only ever makes a reader keep a volume it could have deleted).
// It is safe for concurrent use.
//
// The hashes of the last listing are a sorted slice, 8 bytes a name (a
// map took about 28); the changes since are counted in a map, folded into
// the slice once they grow past an eighth of it.
//
// While a listing runs behind the watch (Keeper.Behind), Seen is open: it
// does not know yet what existed at the listing's resourceVersion, so Has
// answers true for every name (a reader then keeps the volume, or asks
// the API server), and the watch's changes are counted from zero, a
// deletion below it, until the listing settles them.
type Seen struct {
	mu    sync.RWMutex
	seed  maphash.Seed
	base  []uint64         // sorted; a hash added n times is there n times
	delta map[uint64]int32 // added minus removed since base was made
	n     int
	open  bool
	// listed is closed once a listing filled Seen (replace, settle), and
	// made anew when one behind the watch opens it (openUp).
	listed     chan struct{}
	listedDone bool
}

// NewSeen returns an empty Seen.
func NewSeen() *Seen {
	return &Seen{seed: maphash.MakeSeed(), delta: map[uint64]int32{}, listed: make(chan struct{})}
}

// WaitListed waits until a listing has filled Seen and none runs behind
// the watch (Complete, after a first listing), or ctx ends.
func (s *Seen) WaitListed(ctx context.Context) error {
	s.mu.RLock()
	ch := s.listed
	s.mu.RUnlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// markListed closes listed; s.mu is held.
func (s *Seen) markListed() {
	if !s.listedDone {
		close(s.listed)
		s.listedDone = true
	}
}

// Has reports whether name was added and not removed since.
func (s *Seen) Has(name string) bool {
	if s == nil || name == "" {
		return false
	}
	h := maphash.String(s.seed, name)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.open || s.count(h) > 0
}

// Complete reports whether Seen holds the name of every object: false
// while a listing runs behind the watch.
func (s *Seen) Complete() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return !s.open
}

// count is how many times h is held; s.mu is held.
func (s *Seen) count(h uint64) int {
	i, found := slices.BinarySearch(s.base, h)
	n := 0
	if found {
		for j := i; j < len(s.base) && s.base[j] == h; j++ {
			n++
		}
	}
	return n + int(s.delta[h])
}

// Len is how many names Seen holds.
func (s *Seen) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.n
}

func (s *Seen) add(names []string, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		if name == "" {
			continue
		}
		h := maphash.String(s.seed, name)
		if delta < 0 && !s.open && s.count(h) == 0 {
			continue // removed more often than added: nothing to remove
		}
		switch d := s.delta[h] + int32(delta); d {
		case 0:
			delete(s.delta, h)
		default:
			s.delta[h] = d
		}
		s.n += delta
	}
	if !s.open && len(s.delta) > len(s.base)/8+1024 {
		s.fold()
	}
}

// fold makes base hold every hash as many times as it is counted, and
// empties delta; s.mu is held.
func (s *Seen) fold() {
	next := make([]uint64, 0, max(s.n, 0))
	for i := 0; i < len(s.base); {
		h, j := s.base[i], i
		for j < len(s.base) && s.base[j] == h {
			j++
		}
		for range (j - i) + int(s.delta[h]) {
			next = append(next, h)
		}
		delete(s.delta, h)
		i = j
	}
	for h, d := range s.delta {
		for range d {
			next = append(next, h)
		}
	}
	slices.Sort(next)
	s.base, s.delta = next, map[uint64]int32{}
}

// hashes adds the hashes of names to hashes, a Seen's listing under
// construction, and returns it.
func (s *Seen) hashes(hashes []uint64, names []string) []uint64 {
	for _, name := range names {
		if name != "" {
			hashes = append(hashes, maphash.String(s.seed, name))
		}
	}
	return hashes
}

// replace makes hashes (made by hashes, in any order) what s holds.
func (s *Seen) replace(hashes []uint64) {
	slices.Sort(hashes)
	if cap(hashes) > len(hashes)+len(hashes)/8 {
		hashes = slices.Clone(hashes) // the listing's spare room goes
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base, s.delta, s.n, s.open = hashes, map[uint64]int32{}, len(hashes), false
	s.markListed()
}

// openUp empties s and opens it: a listing runs behind the watch, whose
// changes are counted from now on.
func (s *Seen) openUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base, s.delta, s.n, s.open = nil, map[uint64]int32{}, 0, true
	if s.listedDone {
		s.listed, s.listedDone = make(chan struct{}), false
	}
}

// settle closes an open s: hashes (made by hashes, in any order) are what
// existed at the listing's resourceVersion, and the changes counted since
// apply on top of them.
func (s *Seen) settle(hashes []uint64) {
	slices.Sort(hashes)
	if cap(hashes) > len(hashes)+len(hashes)/8 {
		hashes = slices.Clone(hashes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base, s.n, s.open = hashes, len(hashes), false
	s.markListed()
	for h, d := range s.delta {
		if d == 0 {
			delete(s.delta, h)
		}
		s.n += int(d)
	}
	if len(s.delta) > len(s.base)/8+1024 {
		s.fold()
	}
}
