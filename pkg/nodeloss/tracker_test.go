package nodeloss

import (
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
	return &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
			{Key: key, Operator: v1.NodeSelectorOpIn, Values: values}}}}}}}}
}

func TestTracker(t *testing.T) {
	now := t0
	tr := NewTracker(func() time.Time { return now })
	for _, n := range []string{"node-1", "node-2"} {
		if changed, _ := tr.Observe(n, node(n, false)); changed {
			t.Errorf("%s: a Ready node's first event changed its loss", n)
		}
	}
	local := pvAffinity(hostKey, "node-2")
	zonal := pvAffinity("zone", "a")
	if got := tr.VolumeNode(local); got != "" {
		t.Errorf("no node lost: VolumeNode %q", got)
	}

	now = t0.Add(time.Minute)
	if changed, labels := tr.Observe("node-2", node("node-2", true)); !changed || labels[hostKey] != "node-2" {
		t.Errorf("taint: changed %v, labels %v", changed, labels)
	}
	if got := tr.VolumeNode(local); got != "node-2" {
		t.Errorf("local PV of a tainted node: %q", got)
	}
	if got := tr.VolumeNode(zonal); got != "" {
		t.Errorf("a PV of both nodes' zone names one node: %q", got)
	}
	if got := tr.VolumeNode(&v1.PersistentVolume{}); got != "" {
		t.Errorf("a PV without affinity names %q", got)
	}

	// Deleted after the taint: one loss, timed from the taint.
	now = t0.Add(2 * time.Minute)
	if changed, _ := tr.Observe("node-2", nil); changed {
		t.Error("deleting a tainted node began a new loss")
	}
	got, known := tr.Get("node-2")
	if !known || got.Loss != Deleted || !got.Since.Equal(t0.Add(time.Minute)) {
		t.Errorf("deleted node: %+v known %v", got, known)
	}
	if got := tr.VolumeNode(local); got != "node-2" {
		t.Errorf("local PV of a deleted node (labels remembered): %q", got)
	}

	// Back: a new loss later is timed from then.
	now = t0.Add(3 * time.Minute)
	if changed, _ := tr.Observe("node-2", node("node-2", false)); !changed {
		t.Error("the node's return did not end its loss")
	}
	if got := tr.VolumeNode(local); got != "" {
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
