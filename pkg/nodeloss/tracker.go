package nodeloss

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Tracker keeps what a node informer's events said of each node: its
// labels (kept for a while after its deletion, to tell which PVs it was
// pinned by), and whether and since when it is lost. A loss is timed from
// the first event that showed it (or the taint's timeAdded, when set and
// earlier), and ends with the first event that shows the node back; a loss
// that follows another with no event in between (a relist) counts from the
// first.
//
// A deleted node is forgotten once it has been deleted for longer than
// the tracker's keep, so that what it holds is bounded by the nodes that
// exist and those deleted within keep, however many nodes come and go. A
// PV of a forgotten node that its marks name is still decided on (the
// caller asks the API server about that node, and times its loss from
// then: later, never sooner); one without marks is no longer seen as
// pinned to a lost node.
type Tracker struct {
	now  func() time.Time
	keep time.Duration

	mu    sync.Mutex
	nodes map[string]*tracked
	// hostnames maps a kubernetes.io/hostname label to the node that
	// carries it, where that is not the node's name ("" when two do).
	hostnames map[string]string
	// deleted are the deletions in the order they were seen, to forget.
	deleted []deletion
	// lost are the nodes held lost, so that LostNode answers at once when
	// there are none.
	lost map[string]struct{}
}

type tracked struct {
	labels    map[string]string
	state     Node
	deletedAt time.Time // zero while the node exists
}

type deletion struct {
	name string
	at   time.Time
}

// NewTracker returns an empty Tracker on a clock that forgets a deleted
// node keep after its deletion was seen (0: never). The binder and the
// provisioner keep twice their grace: a loss is decided on within it.
func NewTracker(now func() time.Time, keep time.Duration) *Tracker {
	return &Tracker{now: now, keep: keep, nodes: map[string]*tracked{}, hostnames: map[string]string{}, lost: map[string]struct{}{}}
}

// Observe takes in a node's new state (node nil: deleted) and reports
// whether its loss began or ended, so that the caller can look at the PVs
// that name it.
func (t *Tracker) Observe(name string, node *v1.Node) (changed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.expire(now)
	e := t.nodes[name]
	if e == nil {
		e = &tracked{}
		t.nodes[name] = e
	}
	next := StateOf(name, node, now)
	wasLost := e.state.Loss != NotLost
	if wasLost && next.Loss != NotLost && e.state.Since.Before(next.Since) {
		next.Since = e.state.Since // one loss (tainted, then deleted)
	}
	isLost := next.Loss != NotLost
	e.state = next
	switch {
	case node != nil:
		e.deletedAt = time.Time{}
		t.setLabels(name, e, node.Labels)
	case e.deletedAt.IsZero():
		e.deletedAt = now
		t.deleted = append(t.deleted, deletion{name, now})
	}
	if isLost {
		t.lost[name] = struct{}{}
	} else {
		delete(t.lost, name)
	}
	return wasLost != isLost
}

// setLabels keeps a node's labels and its hostname alias.
func (t *Tracker) setLabels(name string, e *tracked, labels map[string]string) {
	if old := e.labels[HostnameLabel]; old != "" && old != labels[HostnameLabel] && t.hostnames[old] == name {
		delete(t.hostnames, old)
	}
	e.labels = labels
	if h := labels[HostnameLabel]; h != "" && h != name {
		if other, ok := t.hostnames[h]; ok && other != name {
			t.hostnames[h] = "" // two nodes: it names neither
		} else {
			t.hostnames[h] = name
		}
	}
}

// expire forgets the nodes deleted for longer than keep.
func (t *Tracker) expire(now time.Time) {
	if t.keep <= 0 {
		return
	}
	for len(t.deleted) > 0 && now.Sub(t.deleted[0].at) > t.keep {
		d := t.deleted[0]
		t.deleted = t.deleted[1:]
		e := t.nodes[d.name]
		if e == nil || !e.deletedAt.Equal(d.at) {
			continue // back since, or deleted again later
		}
		if h := e.labels[HostnameLabel]; h != "" && t.hostnames[h] == d.name {
			delete(t.hostnames, h)
		}
		delete(t.lost, d.name)
		delete(t.nodes, d.name)
	}
}

// Get is what the events said of a node; known is false when none named
// it (a node deleted before this process started, or forgotten since, or
// not listed yet).
func (t *Tracker) Get(name string) (Node, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(t.now())
	e, ok := t.nodes[name]
	if !ok {
		return Node{Name: name}, false
	}
	return e.state, true
}

// Len is how many nodes the tracker holds, once those deleted for longer
// than keep are forgotten.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(t.now())
	return len(t.nodes)
}

// Pinned is Pinned with what the events showed: (key, v) names node v
// when v carries the label key=v, or the node whose hostname label is v
// when key is kubernetes.io/hostname. The PV's marks vouch for the node
// they name (AnnLostNode) when no event showed its labels (it may be gone
// since before this process started, or forgotten): (key, N) names it
// under any key, and (kubernetes.io/hostname, AnnLostHostname) too.
func (t *Tracker) Pinned(pv *v1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil {
		return ""
	}
	marked, host := pv.Annotations[AnnLostNode], pv.Annotations[AnnLostHostname]
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(t.now())
	return Pinned(pv, func(key, value string) string { return t.resolve(key, value, marked, host) }, t.labels)
}

// resolve names the node (key, value) names; marked and host are what a
// PV's marks say of a node (its name and hostname label). A hostname
// value that one node has as its name and label and another as its label
// alone names neither: a volume pinned by it may be on either.
func (t *Tracker) resolve(key, value, marked, host string) string {
	if e := t.nodes[value]; e != nil && e.labels != nil {
		if e.labels[key] == value {
			if _, alias := t.hostnames[value]; alias && key == HostnameLabel {
				return ""
			}
			return value
		}
	} else if value == marked {
		return value
	}
	if key != HostnameLabel {
		return ""
	}
	if n := t.hostnames[value]; n != "" {
		return n
	}
	if e := t.nodes[marked]; marked != "" && value == host && (e == nil || e.labels == nil) {
		return marked
	}
	return ""
}

// labels are the last labels the events showed of a node (Labels); the
// caller holds mu.
func (t *Tracker) labels(name string) (map[string]string, bool) {
	if e := t.nodes[name]; e != nil && e.labels != nil {
		return e.labels, true
	}
	return nil, false
}

// Hostname is the hostname label of a node the events showed, or "".
func (t *Tracker) Hostname(name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.nodes[name]; e != nil {
		return e.labels[HostnameLabel]
	}
	return ""
}

// LostNode names the lost node a PV is pinned to (by what the events
// showed), or "": a node forgotten since is none. It is cheap: no node
// is walked.
func (t *Tracker) LostNode(pv *v1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(t.now())
	if len(t.lost) == 0 {
		return ""
	}
	resolve := func(key, value string) string { return t.resolve(key, value, "", "") }
	// The node named first, its labels checked only when it is lost: with
	// labels, Pinned answers the same node or none.
	name := Pinned(pv, resolve, nil)
	if e := t.nodes[name]; e != nil && e.state.Loss != NotLost && Pinned(pv, resolve, t.labels) == name {
		return name
	}
	return ""
}
