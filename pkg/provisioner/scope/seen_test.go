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

// TestSeenFoldsPastAnEighth: the changes since the last listing are
// folded into it once they count more names than an eighth of it plus
// 1024, and not before; every name stays held across the fold.
func TestSeenFoldsPastAnEighth(t *testing.T) {
	s := NewSeen()
	var listing []uint64
	for i := range 8000 {
		listing = s.hashes(listing, []string{fmt.Sprint("listed-", i)})
	}
	s.replace(listing)
	limit := 8000/8 + 1024
	for i := range limit {
		s.add([]string{fmt.Sprint("added-", i)}, +1)
	}
	if len(s.delta) != limit || len(s.base) != 8000 {
		t.Fatalf("at the limit: %d changes, %d listed; want %d and 8000 (no fold yet)", len(s.delta), len(s.base), limit)
	}
	s.add([]string{"one-more"}, +1)
	if len(s.delta) != 0 || len(s.base) != 8000+limit+1 {
		t.Fatalf("past the limit: %d changes, %d listed; want 0 and %d", len(s.delta), len(s.base), 8000+limit+1)
	}
	for _, name := range []string{"listed-0", "listed-7999", "added-0", fmt.Sprint("added-", limit-1), "one-more"} {
		if !s.Has(name) {
			t.Errorf("%s not held after the fold", name)
		}
	}
	if s.Len() != 8000+limit+1 {
		t.Errorf("Len = %d, want %d", s.Len(), 8000+limit+1)
	}
}

// TestSeenReplaceDropsSpareRoom: a listing whose slice has more than an
// eighth of spare room is copied, one with less is taken as it is.
func TestSeenReplaceDropsSpareRoom(t *testing.T) {
	for _, tt := range []struct {
		len, cap int
		copied   bool
	}{
		{80, 80, false},
		{80, 90, false}, // an eighth exactly
		{80, 91, true},
		{80, 800, true},
	} {
		s := NewSeen()
		listing := make([]uint64, tt.len, tt.cap)
		for i := range listing {
			listing[i] = uint64(i)
		}
		s.replace(listing)
		if copied := &s.base[0] != &listing[0]; copied != tt.copied {
			t.Errorf("len %d cap %d: copied %v, want %v", tt.len, tt.cap, copied, tt.copied)
		}
		if s.Len() != tt.len {
			t.Errorf("len %d cap %d: Len = %d", tt.len, tt.cap, s.Len())
		}
	}
}
