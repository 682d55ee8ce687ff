package scope

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
)

// TestSeenWaitListed: WaitListed waits for a first listing, whole or
// behind the watch, and again while one behind the watch runs.
func TestSeenWaitListed(t *testing.T) {
	s := NewSeen()
	// Listed: WaitListed returns at once. Not: it waits until ctx ends.
	listed := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		return s.WaitListed(ctx) == nil
	}
	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{"new", func() {}, false},
		{"a whole listing", func() { s.replace(nil) }, true},
		{"a listing behind the watch opens it", s.openUp, false},
		{"the listing caught up", func() { s.settle(nil) }, true},
		{"caught up twice", func() { s.settle(nil) }, true},
		{"opened again", s.openUp, false},
		{"opened twice", s.openUp, false},
		{"replaced by a whole listing", func() { s.replace(nil) }, true},
	}
	for _, st := range steps {
		st.do()
		if got := listed(); got != st.want {
			t.Errorf("%s: listed %v, want %v", st.name, got, st.want)
		}
	}
}

// TestListingBehindWaitsForBehindAfter: the rest of a listing behind the
// watch is read only once BehindAfter returns, the informer synced and
// serving the watch meanwhile; an error from it cuts the listing short,
// and a whole one follows.
func TestListingBehindWaitsForBehindAfter(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fails=%v", fail), func(t *testing.T) {
			n := FirstPage + testPage + 10
			p := &pagedClaims{items: manyClaims(n, func(i int) bool { return i%50 == 0 })}
			asked, gate := make(chan struct{}, 10), make(chan struct{})
			inf, k, watches, ctx := behindInformer(t, p, func(lw *ListerWatcher) {
				lw.BehindAfter = func(ctx context.Context) error {
					asked <- struct{}{}
					select {
					case <-gate:
					case <-ctx.Done():
						return ctx.Err()
					}
					if fail {
						return errors.New("the claims' listing ended")
					}
					return nil
				}
			})
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("no sync")
			}
			fw := <-watches
			select {
			case <-asked:
			case <-time.After(20 * time.Second):
				t.Fatal("the rest of the listing never asked BehindAfter")
			}
			p.mu.Lock()
			calls := len(p.calls)
			p.mu.Unlock()
			if calls != 1 || k.Seen().Complete() {
				t.Fatalf("%d pages read before BehindAfter returned, Seen complete %v: want the first alone, and Seen open", calls, k.Seen().Complete())
			}
			fresh := named(claim(map[string]string{annSP: driver}, nil, ""), "new", "u-new")
			fresh.ResourceVersion = "13"
			fw.Add(fresh)
			poll(ctx, t, "the watch's claim while the rest waits", func() bool { _, ok, _ := inf.GetStore().GetByKey("ns/new"); return ok })
			close(gate)
			// Whole or caught up: every claim of ours, and the new one
			// (the fake API lists no "new", so a whole listing drops it).
			want := (n+49)/50 + 1
			if fail {
				want--
			}
			poll(ctx, t, "the listing to end", func() bool {
				return k.Seen().Complete() && len(inf.GetStore().ListKeys()) == want
			})
			p.mu.Lock()
			defer p.mu.Unlock()
			firsts := 0
			for _, c := range p.calls {
				if c.Continue == "" {
					firsts++
				}
			}
			if wantFirsts := map[bool]int{false: 1, true: 2}[fail]; firsts != wantFirsts {
				t.Errorf("%d listings started, want %d (calls %+v)", firsts, wantFirsts, p.calls)
			}
		})
	}
}
