package sim

import (
	"sort"
	"testing"
)

// TestWritersHaveMoves: every field of writers.go that a party may write
// is written by a move some schedule offers, and every move a schedule
// offers has its row: the world is drawn from the table, not hand-picked.
// Schedules run from seed 1 until every row's move was offered, at most
// 1,500 (the rarest, detach, needs a VolumeAttachment: 900 schedules
// since the snapshot moves of issue 33, item 2; 744 before).
func TestWritersHaveMoves(t *testing.T) {
	rows := map[string]bool{}
	for _, row := range writers {
		rows[row.move] = true
	}
	offered := map[string]bool{}
	missing := func() int {
		n := 0
		for m := range rows {
			if !offered[m] {
				n++
			}
		}
		return n
	}
	for seed := int64(1); seed <= 1500 && missing() > 0; seed++ {
		for m := range RunSchedule(seed).Offered {
			offered[m] = true
		}
	}
	for _, row := range writers {
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
