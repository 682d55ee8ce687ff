package sim

import (
	"sort"
	"testing"
)

// TestWritersHaveMoves: every field of writers.go that a party may write
// is written by a move some schedule offers, and every move a schedule
// offers has its row: the world is drawn from the table, not hand-picked.
func TestWritersHaveMoves(t *testing.T) {
	offered := map[string]bool{}
	for seed := int64(1); seed <= 40; seed++ {
		for m := range RunSchedule(seed).Offered {
			offered[m] = true
		}
	}
	rows := map[string]bool{}
	for _, row := range writers {
		rows[row.move] = true
		if !offered[row.move] {
			t.Errorf("%s may write %s %s, but no schedule offered move %q", row.party, row.kind, row.field, row.move)
		}
	}
	var extra []string
	for m := range offered {
		if !rows[m] {
			extra = append(extra, m)
		}
	}
	sort.Strings(extra)
	for _, m := range extra {
		t.Errorf("move %q writes a field writers.go does not name: add its row", m)
	}
}
