package server

import (
	"fmt"
	"testing"
	"time"
)

// op is one step on a ttlCache[string, string] whose values cost their
// length: a put of key=value, or a get of key, at a time from the start.
type op struct {
	at         time.Duration
	put        bool
	key, value string
	want       string // a get's value, "" for none
}

func TestTTLCache(t *testing.T) {
	const ttl = 10 * time.Second
	// Room for two entries of 8 bytes, not three.
	budget := 2*(entryOverhead+8) + entryOverhead
	tests := []struct {
		name        string
		ops         []op
		entries     int // held after the ops
		bytes       int
		maxBytes    int // budget unless set
		unlimitedOK bool
	}{
		{name: "a put is got", ops: []op{
			{put: true, key: "a", value: "aaaaaaaa"},
			{key: "a", want: "aaaaaaaa"},
			{key: "b"},
		}, entries: 1, bytes: entryOverhead + 8},
		{name: "got until its ttl, not at it", ops: []op{
			{put: true, key: "a", value: "aaaaaaaa"},
			{at: ttl - time.Nanosecond, key: "a", want: "aaaaaaaa"},
			{at: ttl, key: "a"},
		}},
		{name: "a get drops the expired", ops: []op{
			{put: true, key: "a", value: "aaaaaaaa"},
			{at: time.Second, put: true, key: "b", value: "bbbbbbbb"},
			{at: ttl, key: "b", want: "bbbbbbbb"},
		}, entries: 1, bytes: entryOverhead + 8},
		{name: "a put drops the expired", ops: []op{
			{put: true, key: "a", value: "aaaaaaaa"},
			{at: time.Second, put: true, key: "b", value: "bbbbbbbb"},
			{at: ttl + time.Second, put: true, key: "c", value: "c"},
		}, entries: 1, bytes: entryOverhead + 1},
		{name: "a put replaces the key's value and its bytes", ops: []op{
			{put: true, key: "a", value: "aaaaaaaa"},
			{at: time.Second, put: true, key: "a", value: "A"},
			{at: ttl, key: "a", want: "A"},
		}, entries: 1, bytes: entryOverhead + 1},
		{name: "past the budget the oldest go", ops: []op{
			{put: true, key: "a", value: "aaaaaaaa"},
			{put: true, key: "b", value: "bbbbbbbb"},
			{put: true, key: "c", value: "cccccccc"},
			{key: "a"},
			{key: "b", want: "bbbbbbbb"},
			{key: "c", want: "cccccccc"},
		}, entries: 2, bytes: 2 * (entryOverhead + 8)},
		{name: "as many go as the new entry needs", ops: []op{
			{put: true, key: "a", value: "aaaaaaaa"},
			{put: true, key: "b", value: "bbbbbbbb"},
			{put: true, key: "c", value: fmt.Sprintf("%*s", entryOverhead+16, "c")},
			{key: "a"},
			{key: "b"},
		}, entries: 1, bytes: 2*entryOverhead + 16},
		{name: "exactly the budget fits", ops: []op{
			{put: true, key: "a", value: "aaaaaaaa"},
			{put: true, key: "b", value: "bbbbbbbb"},
			{key: "a", want: "aaaaaaaa"},
		}, maxBytes: 2 * (entryOverhead + 8), entries: 2, bytes: 2 * (entryOverhead + 8)},
		{name: "an entry larger than the budget is not kept", ops: []op{
			{put: true, key: "a", value: "aaaaaaaa"},
			{put: true, key: "big", value: fmt.Sprintf("%*s", 3*entryOverhead, "x")},
			{key: "big"},
			{key: "a", want: "aaaaaaaa"},
		}, entries: 1, bytes: entryOverhead + 8},
		{name: "an entry of exactly the budget is kept", ops: []op{
			{put: true, key: "a", value: "aaaaaaaa"},
			{put: true, key: "all", value: fmt.Sprintf("%*s", budget-entryOverhead, "x")},
			{key: "a"},
		}, entries: 1, bytes: budget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTTLCache[string](ttl, cmpOr(tt.maxBytes, budget), func(v string) int { return len(v) })
			start := time.Unix(1000, 0)
			for i, o := range tt.ops {
				if o.put {
					c.put(o.key, o.value, start.Add(o.at))
					continue
				}
				got, ok := c.get(o.key, start.Add(o.at))
				if ok != (o.want != "") || got != o.want {
					t.Errorf("op %d: get %q at %s = %q, %v; want %q", i, o.key, o.at, got, ok, o.want)
				}
			}
			entries, bytes := c.held()
			if entries != tt.entries || bytes != tt.bytes {
				t.Errorf("held %d entries of %d bytes, want %d of %d", entries, bytes, tt.entries, tt.bytes)
			}
			if len(c.entries) != c.order.Len() {
				t.Errorf("%d keys but %d entries in order", len(c.entries), c.order.Len())
			}
		})
	}
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}
