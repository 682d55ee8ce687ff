package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tether-csi/tether/pkg/provisioner/request"
)

const relabelDriver = "local.csi.tether.dev"

// releasedPV is a Released PV of the driver (not settled: the provisioner
// keeps it whole when it is ours) pinned to the nodes with rack.
func releasedPV(name, rack string) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: relabelDriver, VolumeHandle: name}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "example.com/rack", Operator: v1.NodeSelectorOpIn, Values: []string{rack}}},
			}}}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeReleased},
	}
}

// TestNodeLabelsFlapRelistsWithoutExit (issue 49, defect 5): in
// node-deployment mode, a node label that changes again and again makes
// the PV informer list again, spaced by the backoff, and never ends the
// process (the provisioner used to exit on each change and start again,
// a crash loop under a flapping label). A PV that the last change makes
// this node's is in the cache after, with an event on the node that names
// the labels, and the counter counts each listing.
func TestNodeLabelsFlapRelistsWithoutExit(t *testing.T) {
	const flaps = 10
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "node-a-uid",
		Labels: map[string]string{"example.com/rack": "r1", "example.com/flap": "0"}}}
	client := fake.NewClientset(node, releasedPV("pv-here", "r1"), releasedPV("pv-later", "r2"))
	var lists atomic.Int32
	client.PrependReactor("list", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return false, nil, nil
	})
	c := newCaches(client, cacheOptions{Driver: relabelDriver, Node: node.Name, Request: request.Options{VolumeNamePrefix: "pvc"}})
	clk := clocktesting.NewFakeClock(time.Now())
	recorder := record.NewFakeRecorder(100)
	c.clock, c.recorder = clk, recorder
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.start(ctx)
	poll := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
		if err != nil {
			t.Fatalf("%s: %d listings, %v relists counted, cached %v", what, lists.Load(), counted(c), c.volumes.GetStore().ListKeys())
		}
	}
	cached := func(name string) bool {
		_, ok, _ := c.volumes.GetStore().GetByKey(name)
		return ok
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.volumes.HasSynced) {
		t.Fatal("no sync")
	}
	if lists.Load() != 1 || !cached("pv-here") || cached("pv-later") {
		t.Fatalf("at start: %d listings, cached %v; want 1, pv-here alone", lists.Load(), c.volumes.GetStore().ListKeys())
	}

	relabel := func(key, value string) {
		t.Helper()
		n, err := client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels[key] = value
		if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The first change is served at once.
	relabel("example.com/flap", "1")
	poll("the first change's listing", func() bool { return lists.Load() == 2 && counted(c) == 1 })
	// The next ones, and the one that makes pv-later this node's, wait
	// for the backoff: the clock stands still, so no listing follows.
	for i := 2; i <= flaps; i++ {
		relabel("example.com/flap", fmt.Sprint(i))
	}
	relabel("example.com/rack", "r2")
	poll("the changes seen, the next listing waiting for its backoff", func() bool {
		n, err := c.nodes.Get(node.Name)
		return err == nil && n.Labels["example.com/rack"] == "r2" && clk.HasWaiters()
	})
	if got := counted(c); got != 1 {
		t.Fatalf("%v listings asked for before the backoff allows another, want 1", got)
	}
	// Once the backoff allows, one listing serves every change since.
	clk.Step(relistMin)
	poll("pv-later cached after the listing", func() bool { return cached("pv-later") })
	if n := counted(c); n != 2 {
		t.Errorf("%v listings asked for, want 2 (one at the first change, one after the backoff)", n)
	}
	poll("one listing per listing asked for", func() bool { return float64(lists.Load()) == counted(c)+1 })
	if ctx.Err() != nil {
		t.Fatal("the caches' context ended")
	}
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	if len(events) != 2 || !strings.HasPrefix(events[0], "Normal "+reasonRelisted) || !strings.Contains(events[0], "example.com/flap") ||
		!strings.Contains(strings.Join(events, " "), "example.com/rack") {
		t.Errorf("events %q: want two Normal %s naming the labels changed", events, reasonRelisted)
	}
}

func counted(c *caches) float64 {
	var m dto.Metric
	if err := c.relists.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func TestNodeRef(t *testing.T) {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "u1"}}
	if got := nodeRef(func() (*v1.Node, error) { return n, nil }, "node-a")(); got != n {
		t.Errorf("with the node in the lister: %v, want the node", got)
	}
	gone := func() (*v1.Node, error) { return nil, fmt.Errorf("not found") }
	ref, ok := nodeRef(gone, "node-a")().(*v1.ObjectReference)
	if !ok || ref.Kind != "Node" || ref.Name != "node-a" || ref.UID != "node-a" {
		t.Errorf("without it: %+v, want a reference to Node node-a, its name as UID", ref)
	}
}
