package binder

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

// The first lists are stored, not queued; once stored, all but the settled
// pairs are queued, and every volume whose node loss is under way.
func TestQueueFirstLists(t *testing.T) {
	settled := func(claim, pv string, opts ...pvOpt) []runtime.Object {
		c, p := settledPair()
		c.Name, c.UID, c.Spec.VolumeName = claim, types.UID("uid-"+claim), pv
		p.Name = pv
		pvClaimRef(claim, "uid-"+claim)(p)
		for _, o := range opts {
			o(p)
		}
		return []runtime.Object{c, p}
	}
	lost := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3", Labels: map[string]string{v1.LabelHostname: "n3"}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: v1.TaintNodeOutOfService, Effect: v1.TaintEffectNoExecute}}}}
	objs := []runtime.Object{lost, newPVC("pending", "1Gi"), newPV("free", "1Gi"), newPV("prebound", "1Gi", pvClaimRef("nobody", ""))}
	objs = append(objs, settled("c1", "pv1")...)
	objs = append(objs, settled("c2", "pv2", pvAnn(nodeloss.AnnLostNode, "n9"))...)
	objs = append(objs, settled("c3", "pv3", pvNode(v1.LabelHostname, "n3"))...)
	objs = append(objs, settled("c4", "pv4", pvNode(v1.LabelHostname, "n4"))...)
	c, _ := newTestController(t, objs...)
	c.Start(t.Context())
	if !pollUntil(10*time.Second, c.Synced) {
		t.Fatal("caches did not sync")
	}
	// Before: nothing of the first lists, but what the node handler queues
	// when it sees a node lost (pv3, if the index held it by then).
	if got := drain(c.claimQueue); len(got) != 0 {
		t.Errorf("the first lists queued claims %v before queueFirstLists", got)
	}
	if got := drain(c.volumeQueue); len(got) > 1 || len(got) == 1 && got[0] != "pv3" {
		t.Errorf("the first lists queued volumes %v before queueFirstLists (only pv3 may be, by the node handler)", got)
	}
	c.queueFirstLists()
	c.queueFirstLists() // once
	if got, want := drain(c.claimQueue), []string{ns + "/pending"}; !slices.Equal(got, want) {
		t.Errorf("claims queued %v, want %v", got, want)
	}
	if got, want := drain(c.volumeQueue), []string{"free", "prebound", "pv2", "pv3"}; !slices.Equal(got, want) {
		t.Errorf("volumes queued %v, want %v (not the settled pv1 and pv4; pv2 marked, pv3 on a lost node)", got, want)
	}
}

// drain takes every key out of a queue, sorted.
func drain(q workqueue.TypedRateLimitingInterface[string]) []string {
	var out []string
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
