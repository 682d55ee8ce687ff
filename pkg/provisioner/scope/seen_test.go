package scope

import (
	"fmt"
	"testing"
)

// Seen answers as a map of counts would, through listings, adds and
// removals past the point where it folds its changes into its listing.
func TestSeenAgreesWithCounts(t *testing.T) {
	s, want := NewSeen(), map[string]int{}
	name := func(i int) string { return fmt.Sprint("pvc-", i%3000) }
	var listing []uint64
	for i := range 2000 {
		listing = s.hashes(listing, []string{name(i)})
		want[name(i)]++
	}
	s.replace(listing)
	rng := uint64(1)
	for step := range 20000 {
		rng = rng*6364136223846793005 + 1442695040888963407
		n, add := name(int(rng>>33)), rng&(1<<20) != 0
		if add {
			s.add([]string{n}, +1)
			want[n]++
		} else {
			s.add([]string{n}, -1)
			if want[n] > 0 {
				want[n]--
			}
		}
		if step%997 == 0 {
			total := 0
			for i := range 3000 {
				if got := s.Has(name(i)); got != (want[name(i)] > 0) {
					t.Fatalf("step %d: Has(%s) = %v, want count %d", step, name(i), got, want[name(i)])
				}
				total += want[name(i)]
			}
			if s.Len() != total {
				t.Fatalf("step %d: Len = %d, want %d", step, s.Len(), total)
			}
		}
	}
}
