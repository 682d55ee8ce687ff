package nodeloss

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const hostKey = "kubernetes.io/hostname"

func node(name string, tainted bool) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hostKey: name, "zone": "a"}}}
	if tainted {
		n.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeOutOfService, Effect: v1.TaintEffectNoExecute}}
	}
	return n
}

func pvAffinity(key string, values ...string) *v1.PersistentVolume {
	return pvTerms([]v1.NodeSelectorRequirement{{Key: key, Operator: v1.NodeSelectorOpIn, Values: values}})
}

func pvTerms(terms ...[]v1.NodeSelectorRequirement) *v1.PersistentVolume {
	sel := &v1.NodeSelector{}
	for _, reqs := range terms {
		sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, v1.NodeSelectorTerm{MatchExpressions: reqs})
	}
	return &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{NodeAffinity: &v1.VolumeNodeAffinity{Required: sel}}}
}

// withFields adds "metadata.name In [name]" to pv's first term.
func withFields(pv *v1.PersistentVolume, name string) *v1.PersistentVolume {
	term := &pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0]
	term.MatchFields = []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{name}}}
	return pv
}

// withHostMark gives pv the marks of node, whose hostname label is host.
func withHostMark(pv *v1.PersistentVolume, node, host string) *v1.PersistentVolume {
	pv.Annotations = map[string]string{AnnLostNode: node, AnnLostHostname: host}
	return pv
}

func in(key string, values ...string) v1.NodeSelectorRequirement {
	return v1.NodeSelectorRequirement{Key: key, Operator: v1.NodeSelectorOpIn, Values: values}
}

func TestTracker(t *testing.T) {
	now := t0
	tr := NewTracker(func() time.Time { return now }, 0)
	for _, n := range []string{"node-1", "node-2"} {
		if tr.Observe(n, node(n, false)) {
			t.Errorf("%s: a Ready node's first event changed its loss", n)
		}
	}
	local := pvAffinity(hostKey, "node-2")
	zonal := pvAffinity("zone", "a")
	if got := tr.LostNode(local); got != "" {
		t.Errorf("no node lost: LostNode %q", got)
	}

	now = t0.Add(time.Minute)
	if !tr.Observe("node-2", node("node-2", true)) {
		t.Error("taint: no change")
	}
	if got := tr.LostNode(local); got != "node-2" {
		t.Errorf("local PV of a tainted node: %q", got)
	}
	if got := tr.LostNode(zonal); got != "" {
		t.Errorf("a zonal PV names a node: %q", got)
	}
	if got := tr.LostNode(&v1.PersistentVolume{}); got != "" {
		t.Errorf("a PV without affinity names %q", got)
	}

	// Deleted after the taint: one loss, timed from the taint.
	now = t0.Add(2 * time.Minute)
	if tr.Observe("node-2", nil) {
		t.Error("deleting a tainted node began a new loss")
	}
	got, known := tr.Get("node-2")
	if !known || got.Loss != Deleted || !got.Since.Equal(t0.Add(time.Minute)) {
		t.Errorf("deleted node: %+v known %v", got, known)
	}
	if got := tr.LostNode(local); got != "node-2" {
		t.Errorf("local PV of a deleted node (labels remembered): %q", got)
	}

	// Back: a new loss later is timed from then.
	now = t0.Add(3 * time.Minute)
	if !tr.Observe("node-2", node("node-2", false)) {
		t.Error("the node's return did not end its loss")
	}
	if got := tr.LostNode(local); got != "" {
		t.Errorf("node back: %q", got)
	}
	now = t0.Add(4 * time.Minute)
	tr.Observe("node-2", node("node-2", true))
	if got, _ := tr.Get("node-2"); !got.Since.Equal(now) {
		t.Errorf("second loss since %s, want %s", got.Since, now)
	}
	if _, known := tr.Get("node-9"); known {
		t.Error("a node no event named is known")
	}
}

// TestPinned: what pins a PV to a node, and what does not (issue 33's
// defect 4: a zone that holds one node is not that node's).
func TestPinned(t *testing.T) {
	now := t0
	tr := NewTracker(func() time.Time { return now }, 0)
	tr.Observe("node-1", node("node-1", false))
	tr.Observe("node-2", node("node-2", true))
	fqdn := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-3.example.com", Labels: map[string]string{hostKey: "node-3", "zone": "b"}}}
	tr.Observe(fqdn.Name, fqdn)
	csiKey := "topology.local.csi.tether.dev/node"
	tr.Observe("node-4", &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-4", Labels: map[string]string{hostKey: "node-4", csiKey: "node-4", "zone": "a"}}})
	tests := []struct {
		name   string
		pv     *v1.PersistentVolume
		marked string
		want   string
	}{
		{"hostname", pvAffinity(hostKey, "node-2"), "", "node-2"},
		{"a CSI driver's node key", pvAffinity(csiKey, "node-4"), "", "node-4"},
		{"a driver's node key and zone in one term", pvTerms([]v1.NodeSelectorRequirement{in("zone", "a"), in(csiKey, "node-4")}), "", "node-4"},
		{"hostname label that is not the node's name", pvAffinity(hostKey, "node-3"), "", "node-3.example.com"},
		{"zone with one node", pvAffinity("zone", "b"), "", ""},
		{"zone named like no node", pvAffinity("zone", "a"), "", ""},
		{"two hosts in one requirement", pvAffinity(hostKey, "node-1", "node-2"), "", ""},
		{"two terms, two nodes", pvTerms([]v1.NodeSelectorRequirement{in(hostKey, "node-1")}, []v1.NodeSelectorRequirement{in(hostKey, "node-2")}), "", ""},
		{"two terms, one node", pvTerms([]v1.NodeSelectorRequirement{in(hostKey, "node-4")}, []v1.NodeSelectorRequirement{in(csiKey, "node-4"), in(hostKey, "node-4")}), "", "node-4"},
		{"two terms, one node, which does not meet the second", pvTerms([]v1.NodeSelectorRequirement{in(hostKey, "node-2")}, []v1.NodeSelectorRequirement{in(csiKey, "node-2"), in(hostKey, "node-2")}), "", ""},
		{"a term that asks for another host too", pvTerms([]v1.NodeSelectorRequirement{in(hostKey, "node-2"), in(hostKey, "node-9")}), "", ""},
		{"a node and a zone it is not in", pvTerms([]v1.NodeSelectorRequirement{in(csiKey, "node-4"), in("zone", "b")}), "", ""},
		{"a node and a field that names another", withFields(pvAffinity(csiKey, "node-4"), "node-3.example.com"), "", ""},
		{"a node and a field that names it", withFields(pvAffinity(csiKey, "node-4"), "node-4"), "", "node-4"},
		{"an unknown node its marks name, whatever else the term asks", pvTerms([]v1.NodeSelectorRequirement{in(csiKey, "node-9"), in("zone", "b")}), "node-9", "node-9"},
		{"a term pins nothing", pvTerms([]v1.NodeSelectorRequirement{in(hostKey, "node-2")}, []v1.NodeSelectorRequirement{in("zone", "a")}), "", ""},
		{"one term, two nodes", pvTerms([]v1.NodeSelectorRequirement{in(hostKey, "node-1"), in(csiKey, "node-4")}), "", ""},
		{"NotIn", pvTerms([]v1.NodeSelectorRequirement{{Key: hostKey, Operator: v1.NodeSelectorOpNotIn, Values: []string{"node-1"}}}), "", ""},
		{"a node's name under a key it does not carry", pvAffinity("rack", "node-2"), "", ""},
		{"unknown node", pvAffinity(hostKey, "node-9"), "", ""},
		{"unknown node its mark names", pvAffinity(csiKey, "node-9"), "node-9", "node-9"},
		{"known node its mark names, under a key it does not carry", pvAffinity("rack", "node-2"), "node-2", ""},
		{"unknown node by the hostname its marks name", withHostMark(pvAffinity(hostKey, "host-9"), "node-9", "host-9"), "", "node-9"},
		{"unknown node by another hostname than its marks name", withHostMark(pvAffinity(hostKey, "host-8"), "node-9", "host-9"), "", ""},
		{"the marks' hostname under another key", withHostMark(pvAffinity(csiKey, "host-9"), "node-9", "host-9"), "", ""},
		{"a known node's hostname, marks naming another", withHostMark(pvAffinity(hostKey, "node-3"), "node-9", "node-3"), "", "node-3.example.com"},
		{"a known node's marks: its labels decide, not the marks' hostname", withHostMark(pvAffinity(hostKey, "host-2"), "node-2", "host-2"), "", ""},
		{"no affinity", &v1.PersistentVolume{}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pv := tt.pv.DeepCopy()
			if tt.marked != "" {
				pv.Annotations = map[string]string{AnnLostNode: tt.marked}
			}
			if got := tr.Pinned(pv); got != tt.want {
				t.Errorf("Pinned %q, want %q", got, tt.want)
			}
		})
	}
	// Two nodes with one hostname label: it names neither.
	tr.Observe("node-5.example.com", &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-5.example.com", Labels: map[string]string{hostKey: "node-3"}}})
	if got := tr.Pinned(pvAffinity(hostKey, "node-3")); got != "" {
		t.Errorf("a hostname label two nodes carry pins %q", got)
	}
	if got := tr.Pinned(withHostMark(pvAffinity(hostKey, "node-3"), "node-5.example.com", "node-3")); got != "" {
		t.Errorf("a hostname label two nodes carry pins %q when marks name one of them", got)
	}
	if got, want := tr.Hostname("node-3.example.com"), "node-3"; got != want {
		t.Errorf("Hostname of a node seen: %q, want %q", got, want)
	}
	if got := tr.Hostname("node-9"); got != "" {
		t.Errorf("Hostname of a node never seen: %q", got)
	}
}

// TestTrackerForgetsDeletedNodes: thousands of nodes come and go; the
// tracker holds the nodes that exist and those deleted within its keep,
// and a PV's check walks no node (issue 33's defect 2).
func TestTrackerForgetsDeletedNodes(t *testing.T) {
	now := t0
	keep := 10 * time.Minute
	tr := NewTracker(func() time.Time { return now }, keep)
	tr.Observe("node-0", node("node-0", false))
	for i := 1; i <= 2000; i++ {
		name := fmt.Sprintf("spot-%d", i)
		tr.Observe(name, node(name, false))
		now = now.Add(time.Second)
		tr.Observe(name, nil)
	}
	// The last keep's deletions are kept (one a second), no more.
	if got, want := tr.Len(), 1+int(keep/time.Second); got > want+1 || got < want-1 {
		t.Errorf("tracker holds %d nodes, want about %d (node-0 and the last %s of deletions)", got, want, keep)
	}
	if _, known := tr.Get("spot-1"); known {
		t.Error("a node deleted long ago is still known")
	}
	if got := tr.LostNode(pvAffinity(hostKey, "spot-2000")); got != "spot-2000" {
		t.Errorf("a node deleted within keep: LostNode %q", got)
	}
	if got := tr.LostNode(pvAffinity(hostKey, "spot-1")); got != "" {
		t.Errorf("a forgotten node: LostNode %q", got)
	}
	// A node that came back is not forgotten for its old deletion.
	tr.Observe("node-0", nil)
	now = now.Add(time.Second)
	tr.Observe("node-0", node("node-0", false))
	now = now.Add(2 * keep)
	tr.Observe("node-x", node("node-x", false))
	if _, known := tr.Get("node-0"); !known {
		t.Error("a node back since its deletion was forgotten")
	}
	if got := tr.Len(); got != 2 {
		t.Errorf("after the keep: %d nodes, want 2", got)
	}
}

func BenchmarkLostNodeAfterChurn(b *testing.B) {
	now := t0
	tr := NewTracker(func() time.Time { return now }, time.Hour)
	for i := 0; i < 2000; i++ {
		name := fmt.Sprintf("spot-%d", i)
		tr.Observe(name, node(name, false))
		tr.Observe(name, nil)
	}
	pv := pvAffinity(hostKey, "node-1")
	b.ResetTimer()
	for b.Loop() {
		tr.LostNode(pv)
	}
}

// TestTrackerLostNode: the lost node a PV is pinned to, through a loss, the
// events of a node still lost, a return, a deletion and its forgetting.
func TestTrackerLostNode(t *testing.T) {
	now := t0
	tr := NewTracker(func() time.Time { return now }, 10*time.Minute)
	pv := pvAffinity(hostKey, "node-2")
	step := func(what string, want string) {
		t.Helper()
		if got := tr.LostNode(pv); got != want {
			t.Errorf("%s: LostNode %q, want %q", what, got, want)
		}
	}
	tr.Observe("node-1", node("node-1", false))
	tr.Observe("node-2", node("node-2", false))
	step("both Ready", "")
	tr.Observe("node-2", node("node-2", true))
	step("node-2 out of service", "node-2")
	relabelled := node("node-2", true)
	relabelled.Labels["rack"] = "r1"
	tr.Observe("node-2", relabelled)
	tr.Observe("node-1", node("node-1", false))
	step("node-2 still out of service, other events", "node-2")
	racked := pvTerms([]v1.NodeSelectorRequirement{in(hostKey, "node-2"), in("rack", "r2")})
	if got := tr.LostNode(racked); got != "" {
		t.Errorf("a term node-2 does not meet (rack r2): LostNode %q, want none", got)
	}
	racked.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[1].Values = []string{"r1"}
	if got := tr.LostNode(racked); got != "node-2" {
		t.Errorf("a term node-2 meets (rack r1): LostNode %q, want node-2", got)
	}
	tr.Observe("node-2", node("node-2", false))
	step("node-2 back", "")
	tr.Observe("node-1", node("node-1", true))
	step("another node lost", "")
	tr.Observe("node-2", nil)
	step("node-2 deleted", "node-2")
	tr.Observe("node-1", nil)
	now = now.Add(10 * time.Minute)
	step("node-2 deleted keep ago, to the nanosecond: still held", "node-2")
	now = now.Add(time.Nanosecond)
	step("node-2 forgotten", "")
	if n := tr.Len(); n != 0 {
		t.Errorf("the tracker holds %d nodes once both deleted nodes are forgotten", n)
	}
}

// TestTrackerHostnameAliases: a hostname label names its node while the
// node carries it; a relabelled node no longer answers to the old name,
// which another node may take, and a node forgotten after its deletion leaves its hostname free for
// the node that replaces it.
func TestTrackerHostnameAliases(t *testing.T) {
	now := t0
	tr := NewTracker(func() time.Time { return now }, 10*time.Minute)
	named := func(name, host string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hostKey: host}}}
	}
	pinned := func(what, host, want string) {
		t.Helper()
		if got := tr.Pinned(pvAffinity(hostKey, host)); got != want {
			t.Errorf("%s: a PV of hostname %s is pinned to %q, want %q", what, host, got, want)
		}
	}
	tr.Observe("a.example.com", named("a.example.com", "a"))
	pinned("labelled", "a", "a.example.com")
	tr.Observe("a.example.com", named("a.example.com", "a2"))
	pinned("relabelled: the old hostname", "a", "")
	pinned("relabelled: the new hostname", "a2", "a.example.com")
	tr.Observe("c.example.com", named("c.example.com", "a"))
	pinned("the old hostname taken by another node", "a", "c.example.com")
	tr.Observe("a.example.com", nil)
	pinned("deleted, still held", "a2", "a.example.com")
	now = now.Add(11 * time.Minute)
	pinned("forgotten", "a2", "")
	tr.Observe("b.example.com", named("b.example.com", "a2"))
	pinned("its hostname taken by the node that replaced it", "a2", "b.example.com")
}

// TestTrackerHostnameTwinNamesNeither: node-1 carries the hostname label
// node-1, and so does node-1.dc2. A PV pinned by "kubernetes.io/hostname
// In [node-1]" may be on either, so the value names neither node, whichever
// was seen first, and the loss of node-1 releases nothing of it (issue 49,
// defect 2: node-1, named by the value, was answered before the aliases
// were looked at). Once the twin is gone and forgotten, node-1 is named
// again.
func TestTrackerHostnameTwinNamesNeither(t *testing.T) {
	const csiKey = "topology.local.csi.tether.dev/node"
	for _, order := range [][]string{{"node-1", "node-1.dc2"}, {"node-1.dc2", "node-1"}} {
		now := t0
		tr := NewTracker(func() time.Time { return now }, 10*time.Minute)
		for _, name := range order {
			n := node(name, name == "node-1")
			n.Labels[hostKey] = "node-1"
			n.Labels[csiKey] = name
			tr.Observe(name, n)
		}
		pv := pvAffinity(hostKey, "node-1")
		if got := tr.Pinned(pv); got != "" {
			t.Errorf("seen in the order %v: a hostname two nodes carry pins %q", order, got)
		}
		if got := tr.LostNode(pv); got != "" {
			t.Errorf("seen in the order %v: the PV is taken as on the lost node %q", order, got)
		}
		if got := tr.Pinned(pvAffinity(csiKey, "node-1")); got != "node-1" {
			t.Errorf("seen in the order %v: the driver's own key of node-1 pins %q, want node-1", order, got)
		}
		tr.Observe("node-1.dc2", nil)
		now = now.Add(11 * time.Minute)
		if got := tr.LostNode(pv); got != "node-1" {
			t.Errorf("seen in the order %v: the twin forgotten, the PV is on lost node %q, want node-1", order, got)
		}
	}
}
