package binder

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

const hostname = "kubernetes.io/hostname"

func lossNode(name string, mod func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hostname: name}}}
	if mod != nil {
		mod(n)
	}
	return n
}

func outOfService(n *v1.Node) {
	n.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute}}
}

func notReady(n *v1.Node) {
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
	n.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}}
}

// boundPair is a claim and its provisioned PV on a node.
func boundPair(name, class, node string, reclaim v1.PersistentVolumeReclaimPolicy) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	pv := newPV("pv-"+name, "1Gi", pvClass(class), pvReclaim(reclaim), pvNode(hostname, node), pvClaimRef(name, "uid-"+name),
		pvPhase(v1.VolumeBound), pvDynamic("local.csi.tether.dev"), pvCSISource("local.csi.tether.dev"),
		func(pv *v1.PersistentVolume) { pv.Finalizers = []string{nodeloss.FinalizerDeletion} })
	claim := newPVC(name, "1Gi", claimClass(class), claimBound(pv.Name), func(c *v1.PersistentVolumeClaim) {
		c.Status.Capacity = pv.Spec.Capacity
		c.Status.AccessModes = pv.Spec.AccessModes
	})
	return claim, pv
}

// TestNodeLossRelease runs the binder on a fake API with one class that
// opts in and one that does not, a node tainted out-of-service, one
// NotReady without the taint, one Ready and one deleted, on a clock the
// test moves: only the opted-in claims of the lost nodes are released,
// after the grace; a Delete PV goes, a Retain PV stays Released without
// the provisioner's finalizer.
func TestNodeLossRelease(t *testing.T) {
	release := newClass("release", "local.csi.tether.dev", wffc(), func(sc *storagev1.StorageClass) {
		sc.Annotations = map[string]string{nodeloss.AnnPolicy: "true"}
	})
	plain := newClass("plain", "local.csi.tether.dev", wffc())
	objs := []runtime.Object{release, plain, lossNode("node-1", nil), lossNode("node-2", outOfService), lossNode("node-3", notReady),
		lossNode("node-4", nil), lossNode("node-5", outOfService)}
	pairs := map[string]struct {
		class, node string
		reclaim     v1.PersistentVolumeReclaimPolicy
		released    bool
	}{
		"lost-delete":  {"release", "node-2", v1.PersistentVolumeReclaimDelete, true},
		"lost-retain":  {"release", "node-2", v1.PersistentVolumeReclaimRetain, true},
		"deleted-node": {"release", "node-4", v1.PersistentVolumeReclaimDelete, true},
		"no-policy":    {"plain", "node-2", v1.PersistentVolumeReclaimDelete, false},
		"not-ready":    {"release", "node-3", v1.PersistentVolumeReclaimDelete, false},
		"ready":        {"release", "node-1", v1.PersistentVolumeReclaimDelete, false},
		"back":         {"release", "node-5", v1.PersistentVolumeReclaimDelete, false},
	}
	for name, p := range pairs {
		claim, pv := boundPair(name, p.class, p.node, p.reclaim)
		objs = append(objs, claim, pv)
	}
	client := fake.NewClientset(objs...)
	v := &versions{tracker: client.Tracker(), next: 1000}
	client.PrependReactor("update", "*", v.update)
	client.PrependReactor("patch", "persistentvolumes", v.patch)
	recorder := record.NewFakeRecorder(1000)
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c, err := New(Options{Client: client, Workers: 2, Recorder: recorder, NodeLossGrace: time.Hour,
		Clock: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := runController(t, c)
	pvs := client.CoreV1().PersistentVolumes()
	claims := client.CoreV1().PersistentVolumeClaims(ns)

	// node-4 is deleted once the binder watches.
	if !pollUntil(10*time.Second, c.Synced) {
		t.Fatal("the binder did not sync")
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "node-4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	marked := func(name string) bool {
		pv, err := pvs.Get(ctx, "pv-"+name, metav1.GetOptions{})
		return err == nil && pv.Annotations[nodeloss.AnnLostNode] != ""
	}
	for name, p := range pairs {
		if (p.released || name == "back") && !pollUntil(10*time.Second, func() bool { return marked(name) }) {
			t.Fatalf("PV of %s not marked lost", name)
		}
	}
	// node-5 comes back within the grace: its PV is unmarked.
	if _, err := client.CoreV1().Nodes().Update(ctx, lossNode("node-5", nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !pollUntil(10*time.Second, func() bool { return !marked("back") }) {
		t.Fatal("PV of back still marked after node-5 came back")
	}
	// Within the grace: marked, nothing deleted, nothing else marked.
	for name, p := range pairs {
		if _, err := claims.Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("claim %s: %v within the grace", name, err)
		}
		if !p.released && marked(name) {
			t.Errorf("PV of %s (class %s, %s) marked lost", name, p.class, p.node)
		}
	}

	// The grace is over; a change to each PV brings it back to the binder.
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	for name := range pairs {
		if _, err := pvs.Patch(ctx, "pv-"+name, types.MergePatchType, []byte(`{"metadata":{"labels":{"poke":"1"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(err error) bool { return apierrors.IsNotFound(err) }
	for name, p := range pairs {
		if !p.released {
			continue
		}
		if !pollUntil(10*time.Second, func() bool { _, err := claims.Get(ctx, name, metav1.GetOptions{}); return gone(err) }) {
			t.Errorf("claim %s not released", name)
		}
	}
	if !pollUntil(10*time.Second, func() bool { _, err := pvs.Get(ctx, "pv-lost-delete", metav1.GetOptions{}); return gone(err) }) {
		t.Error("the Delete PV of a released claim is not deleted")
	}
	ok := pollUntil(10*time.Second, func() bool {
		pv, err := pvs.Get(ctx, "pv-lost-retain", metav1.GetOptions{})
		return err == nil && !slices.Contains(pv.Finalizers, nodeloss.FinalizerDeletion) && nodeloss.Released(pv)
	})
	if !ok {
		t.Error("the Retain PV of a released claim is not kept, released and without the provisioner's finalizer")
	}
	for name, p := range pairs {
		if p.released {
			continue
		}
		if _, err := claims.Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("claim %s (class %s, %s): %v", name, p.class, p.node, err)
		}
		if marked(name) {
			t.Errorf("PV of %s marked", name)
		}
	}
	// Events on the claim, the PV and the node, for each released PV.
	reasons := map[string]int{}
	for len(recorder.Events) > 0 {
		f := strings.Fields(<-recorder.Events)
		if len(f) > 1 {
			reasons[f[1]]++
		}
	}
	if reasons[ReasonNodeLost] != 12 || reasons[ReasonReleasedForNodeLoss] != 9 || reasons[ReasonNodeBack] != 3 {
		t.Errorf("events by reason: %v; want 12 %s, 9 %s and 3 %s (claim, PV and node of each PV)", reasons,
			ReasonNodeLost, ReasonReleasedForNodeLoss, ReasonNodeBack)
	}
}

// versions serves updates and merge patches of PVs as an API server
// does, which the fake's tracker does not: a write whose resourceVersion
// is not the object's is a conflict, and each write moves the version on
// (one count for both, as the index compares them).
type versions struct {
	tracker k8stesting.ObjectTracker
	mu      sync.Mutex
	next    int
}

func (v *versions) update(a k8stesting.Action) (bool, runtime.Object, error) {
	u, ok := a.(k8stesting.UpdateAction)
	if !ok {
		return false, nil, nil
	}
	m, err := meta.Accessor(u.GetObject())
	if err != nil {
		return false, nil, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.next++
	m.SetResourceVersion(strconv.Itoa(v.next))
	return false, nil, nil
}

func (v *versions) patch(a k8stesting.Action) (bool, runtime.Object, error) {
	p, ok := a.(k8stesting.PatchAction)
	if !ok || p.GetPatchType() != types.MergePatchType {
		return false, nil, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	obj, err := v.tracker.Get(p.GetResource(), "", p.GetName())
	if err != nil {
		return true, nil, err
	}
	cur := obj.(*v1.PersistentVolume)
	var doc, patch map[string]any
	raw, _ := json.Marshal(cur)
	if err := json.Unmarshal(raw, &doc); err != nil {
		return true, nil, err
	}
	if err := json.Unmarshal(p.GetPatch(), &patch); err != nil {
		return true, nil, err
	}
	if m, ok := patch["metadata"].(map[string]any); ok && m["resourceVersion"] != nil && m["resourceVersion"] != cur.ResourceVersion {
		return true, nil, apierrors.NewConflict(p.GetResource().GroupResource(), p.GetName(), fmt.Errorf("modified"))
	}
	merged, _ := json.Marshal(mergeInto(doc, patch))
	out := &v1.PersistentVolume{}
	if err := json.Unmarshal(merged, out); err != nil {
		return true, nil, err
	}
	v.next++
	out.ResourceVersion = strconv.Itoa(v.next)
	return true, out, v.tracker.Update(p.GetResource(), out, "")
}

// mergeInto applies a JSON merge patch (RFC 7386) to a document.
func mergeInto(doc, patch map[string]any) map[string]any {
	if doc == nil {
		doc = map[string]any{}
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(doc, k)
		case map[string]any:
			sub, _ := doc[k].(map[string]any)
			doc[k] = mergeInto(sub, pv)
		default:
			doc[k] = v
		}
	}
	return doc
}
