package benchnodes

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// marks notes, polling in a goroutine of its own, when each provisioner
// restarted in a roll logged its caches synced (its log read every 100 ms)
// and when its listings behind the watch caught up (its metrics read every
// second: twenty processes' metrics read ten times a second would cost the
// two cores they share), whatever the roll waits for meanwhile (a probe's
// PV, the next node's restart).
type marks struct {
	mu       sync.Mutex
	pods     []*prov
	watching []bool // restarted, not yet caught up
	polls    int
	stop     context.CancelFunc
	done     chan struct{}
}

func startMarks(ctx context.Context, pods []*prov) *marks {
	ctx, stop := context.WithCancel(ctx)
	m := &marks{pods: pods, watching: make([]bool, len(pods)), stop: stop, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			m.poll()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

// restart runs start (which restarts pod i and resets its marks) and
// watches the pod from then on.
func (m *marks) restart(i int, start func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	start()
	m.watching[i] = true
}

func (m *marks) poll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.polls++
	for i, p := range m.pods {
		if !m.watching[i] {
			continue
		}
		if p.syncedAt.IsZero() {
			if found, err := p.scanLog(); err != nil || !found {
				continue
			}
			p.syncedAt = time.Now()
		}
		if m.polls%10 == 0 && caughtUp(p) {
			m.watching[i] = false
		}
	}
}

// caughtUp says whether p, whose caches synced, has no listing behind its
// watch any more, and notes when it first says so; one without the gauge
// (EP, or a tether of before it) synced on a whole listing.
func caughtUp(p *prov) bool {
	switch behind, has := listingBehind(p.metrics); {
	case has && !behind:
		p.caughtUpAt = time.Now()
		return true
	case !has:
		return true // lists whole: no gauge once it serves its metrics
	}
	return false
}

// wait waits until pending is false for every pod, or the timeout.
func (m *marks) wait(ctx context.Context, timeout time.Duration, what string, pending func(i int, p *prov) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		m.mu.Lock()
		left := 0
		for i, p := range m.pods {
			if pending(i, p) {
				left++
			}
		}
		m.mu.Unlock()
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d provisioners not %s within %s", left, what, timeout)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// synced waits until pod i's caches synced.
func (m *marks) synced(ctx context.Context, i int, timeout time.Duration) error {
	return m.wait(ctx, timeout, "synced", func(j int, p *prov) bool {
		return j == i && m.watching[j] && p.syncedAt.IsZero()
	})
}

// allCaughtUp waits until every restarted pod's listings caught up,
// then stops polling.
func (m *marks) allCaughtUp(ctx context.Context, timeout time.Duration) error {
	defer func() { m.stop(); <-m.done }()
	return m.wait(ctx, timeout, "caught up", func(j int, _ *prov) bool { return m.watching[j] })
}
