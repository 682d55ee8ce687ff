package sim

import (
	"sort"
	"time"
)

// queue is a deterministic work queue in the simulator's time: tether's
// reconcilers and the binder get it in place of client-go's (whose delays
// run on goroutines and the wall clock) through their seams. Nothing calls
// Get: the scheduler picks a ready key and runs the owner's sync itself.
type queue struct {
	w       *World
	name    string
	ready   map[string]bool
	delayed map[string]time.Time
	fails   map[string]int
}

func newQueue(w *World, name string) *queue {
	return &queue{w: w, name: name, ready: map[string]bool{}, delayed: map[string]time.Time{}, fails: map[string]int{}}
}

func (q *queue) Add(key string) { q.ready[key] = true }
func (q *queue) Len() int       { return len(q.ready) }
func (q *queue) Get() (string, bool) {
	return "", true
}
func (q *queue) Done(string)        {}
func (q *queue) ShutDown()          {}
func (q *queue) ShutDownWithDrain() {}
func (q *queue) ShuttingDown() bool { return false }

func (q *queue) AddAfter(key string, d time.Duration) {
	if d <= 0 {
		q.Add(key)
		return
	}
	due := q.w.now.Add(d)
	if t, ok := q.delayed[key]; !ok || due.Before(t) {
		q.delayed[key] = due
	}
}

// AddRateLimited backs off exponentially from 1 s to 60 s (the
// --retry-interval-start and -max defaults' shape).
func (q *queue) AddRateLimited(key string) {
	n := q.fails[key]
	q.fails[key] = n + 1
	d := time.Second << min(n, 6)
	q.AddAfter(key, min(d, time.Minute))
}

func (q *queue) Forget(key string)          { delete(q.fails, key) }
func (q *queue) NumRequeues(key string) int { return q.fails[key] }

// promote moves the delayed keys that are due to ready.
func (q *queue) promote(now time.Time) {
	for k, t := range q.delayed {
		if !t.After(now) {
			delete(q.delayed, k)
			q.ready[k] = true
		}
	}
}

// next is the earliest delayed time, ok false for none.
func (q *queue) next() (time.Time, bool) {
	var best time.Time
	ok := false
	for _, t := range q.delayed {
		if !ok || t.Before(best) {
			best, ok = t, true
		}
	}
	return best, ok
}

func (q *queue) readyKeys() []string {
	out := make([]string, 0, len(q.ready))
	for k := range q.ready {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (q *queue) take(key string) { delete(q.ready, key) }
