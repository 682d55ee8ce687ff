package nodeloss

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// Tracker keeps what a node informer's events said of each node: its
// labels (kept after its deletion, to tell which PVs named it), and
// whether and since when it is lost. A loss is timed from the first event
// that showed it (or the taint's timeAdded, when set and earlier), and
// ends with the first event that shows the node back; a loss that follows
// another with no event in between (a relist) counts from the first.
type Tracker struct {
	now   func() time.Time
	mu    sync.Mutex
	nodes map[string]*tracked
	lost  map[string]*tracked
}

type tracked struct {
	labels  map[string]string
	present bool
	state   Node
}

// NewTracker returns an empty Tracker on a clock.
func NewTracker(now func() time.Time) *Tracker {
	return &Tracker{now: now, nodes: map[string]*tracked{}, lost: map[string]*tracked{}}
}

// Observe takes in a node's new state (node nil: deleted) and reports
// whether its loss began or ended, with the labels it had, so that the
// caller can look at the PVs that name it.
func (t *Tracker) Observe(name string, node *v1.Node) (changed bool, labels map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.nodes[name]
	if e == nil {
		e = &tracked{}
		t.nodes[name] = e
	}
	next := StateOf(name, node, t.now())
	wasLost := e.state.Loss != NotLost
	if wasLost && next.Loss != NotLost && e.state.Since.Before(next.Since) {
		next.Since = e.state.Since // one loss (tainted, then deleted)
	}
	e.state = next
	e.present = node != nil
	if node != nil {
		e.labels = node.Labels
	}
	if next.Loss != NotLost {
		t.lost[name] = e
	} else {
		delete(t.lost, name)
	}
	return wasLost != (next.Loss != NotLost), e.labels
}

// Get is what the events said of a node; known is false when none named
// it (a node deleted before this process started, or not listed yet).
func (t *Tracker) Get(name string) (Node, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.nodes[name]
	if !ok {
		return Node{Name: name}, false
	}
	return e.state, true
}

// VolumeNode names the one lost node a PV's node affinity names, among
// the nodes the events showed: "" when its affinity names no lost node,
// or more than one node (lost or not). It is cheap when no node is lost.
func (t *Tracker) VolumeNode(pv *v1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lost) == 0 {
		return ""
	}
	found := ""
	for name, e := range t.lost {
		if e.labels != nil && storagehelpers.CheckNodeAffinity(pv, e.labels) == nil {
			if found != "" {
				return ""
			}
			found = name
		}
	}
	if found == "" {
		return ""
	}
	for name, e := range t.nodes {
		if name != found && e.labels != nil && storagehelpers.CheckNodeAffinity(pv, e.labels) == nil {
			return ""
		}
	}
	return found
}

// Matches reports whether a PV's node affinity admits a node's labels as
// the events showed them last (false for a node never shown).
func (t *Tracker) Matches(pv *v1.PersistentVolume, name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.nodes[name]
	return ok && e.labels != nil && pv.Spec.NodeAffinity != nil && storagehelpers.CheckNodeAffinity(pv, e.labels) == nil
}
