package scope

import (
	"hash/maphash"
	"sync"
)

// Seen holds names of objects a cache does not keep whole, as 64-bit
// hashes counted per object: Has answers true for every name added and
// not removed since (and, rarely, for another name of the same hash,
// which only ever makes a reader keep a volume it could have deleted).
// It is safe for concurrent use.
type Seen struct {
	mu     sync.RWMutex
	seed   maphash.Seed
	counts map[uint64]uint32
}

// NewSeen returns an empty Seen.
func NewSeen() *Seen {
	return &Seen{seed: maphash.MakeSeed(), counts: map[uint64]uint32{}}
}

// Has reports whether name was added and not removed since.
func (s *Seen) Has(name string) bool {
	if s == nil || name == "" {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.counts[maphash.String(s.seed, name)] > 0
}

// Len is how many names Seen holds.
func (s *Seen) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, c := range s.counts {
		n += int(c)
	}
	return n
}

func (s *Seen) add(names []string, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		if name == "" {
			continue
		}
		h := maphash.String(s.seed, name)
		switch c := s.counts[h]; {
		case delta > 0:
			s.counts[h] = c + 1
		case c > 1:
			s.counts[h] = c - 1
		default:
			delete(s.counts, h)
		}
	}
}

// count adds names to counts, a Seen's counts under construction.
func (s *Seen) count(counts map[uint64]uint32, names []string) {
	for _, name := range names {
		if name != "" {
			counts[maphash.String(s.seed, name)]++
		}
	}
}

// replace makes counts (made by count) what s holds.
func (s *Seen) replace(counts map[uint64]uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts = counts
}
