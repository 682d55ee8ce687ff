package sim

import (
	"fmt"
	"hash/fnv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node churn by the thousand. In one schedule in churnEvery (drawn from a
// hash of the seed, so that the other schedules keep their random stream)
// the autoscaler scales a zone up by burstNodes nodes at once and down
// again: thousands of nodes come and go over the schedule, and the
// binder's node tracker must forget them (checkTracker).
//
// A burst is delivered as a watch stream delivers it: a process's cache
// takes in every pending object of a resource in one step, and a handler
// is handed its notifications in one step, once more than burstAt of them
// wait (fewer go one at a time, as before).
const (
	churnEvery = 25
	burstNodes = 1000
	burstAt    = 64
)

// churnSchedule reports whether the seed's autoscaler works by the
// thousand.
func churnSchedule(seed int64) bool {
	h := fnv.New32a()
	fmt.Fprintf(h, "churn/%d", seed)
	return h.Sum32()%churnEvery == 0
}

// autoscaleBurst scales the zone of a node up by burstNodes nodes when the
// autoscaler has none, or removes all it has.
func (w *World) autoscaleBurst() string {
	if spots := w.spotNodes(); len(spots) > 0 {
		for _, name := range spots {
			_ = w.api.Delete(rNodes, "", name, nil)
		}
		return fmt.Sprintf("autoscaler: scale down, %d nodes removed", len(spots))
	}
	zone := zoneOf(pick(w, nodeNames))
	for range burstNodes {
		w.loss.spotSeq++
		name := fmt.Sprintf("spot-%d", w.loss.spotSeq)
		w.create(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{zoneKey: zone}}})
	}
	return fmt.Sprintf("autoscaler: scale %s up by %d nodes", zone, burstNodes)
}

// burstOptions are the steps that deliver a burst: one per cache resource
// with more than burstAt keys pending, one per handler with more than
// burstAt notifications waiting.
func (w *World) burstOptions(cs []*caches, add func(int, func() string), weight int) {
	for _, c := range cs {
		for _, r := range sortedKeys(c.pending) {
			if len(c.pending[r]) <= burstAt {
				continue
			}
			add(weight, func() string {
				keys := sortedKeys(c.pending[r])
				for _, k := range keys {
					c.deliver(r, k)
				}
				return fmt.Sprintf("deliver %d %s at once to the %s (a burst)", len(keys), r, w.procName(c))
			})
		}
		for _, l := range c.waiting() {
			if len(l.l.fifo) <= burstAt {
				continue
			}
			add(weight, func() string {
				n := len(l.l.fifo)
				for range n {
					l.l.next()
				}
				return fmt.Sprintf("notify the %s's %s handler #%d: %d notifications at once (a burst)", w.procName(c), l.resource, l.index, n)
			})
		}
	}
}

// churnAtRest: in a churn schedule, the autoscaler's nodes come (if none
// are there) and go at rest, twice, and each time time passes beyond the binder's memory of
// deleted nodes (twice the grace): checkTracker then holds it to the nodes
// that exist, and counts what it forgot.
func (w *World) churnAtRest() {
	if !churnSchedule(w.seed) {
		return
	}
	for range 2 {
		if len(w.spotNodes()) == 0 {
			w.tracef("---- %s", w.autoscaleBurst())
			w.settle(0)
		}
		w.tracef("---- %s", w.autoscaleBurst())
		w.settle(0)
		w.now = w.now.Add(2*simGrace + 2*time.Second)
		w.tracef("---- time passes beyond the binder's memory of deleted nodes")
		w.checkTracker()
	}
}
