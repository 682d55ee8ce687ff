package binder

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

// The regressions of issue 33's node-loss defects: each test drives the
// binder's own sync of one PV (syncVolume, as a worker does) over caches
// the test fills and an API server (the fake) that may say otherwise, as
// a lagging cache does.

var lossT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const lossGrace = time.Hour

// lossBinder is a binder whose caches the test fills, on a clock the test
// moves; the API server's objects are the fake's.
type lossBinder struct {
	t        *testing.T
	c        *Controller
	client   *fake.Clientset
	recorder *record.FakeRecorder
	now      time.Time
}

func newLossBinder(t *testing.T, objs ...runtime.Object) *lossBinder {
	t.Helper()
	b := &lossBinder{t: t, client: fake.NewClientset(objs...), recorder: record.NewFakeRecorder(1000), now: lossT0}
	v := &versions{tracker: b.client.Tracker(), next: 1000}
	b.client.PrependReactor("update", "*", v.update)
	b.client.PrependReactor("patch", "persistentvolumes", v.patch)
	c, err := New(Options{Client: b.client, Workers: 1, Recorder: b.recorder, NodeLossGrace: lossGrace,
		Clock: func() time.Time { return b.now }})
	if err != nil {
		t.Fatal(err)
	}
	b.c = c
	for _, o := range objs {
		b.cache(o)
	}
	return b
}

// cache puts an object in the binder's caches (a node: in its tracker),
// as its informers would.
func (b *lossBinder) cache(obj runtime.Object) {
	switch o := obj.(type) {
	case *v1.PersistentVolumeClaim:
		b.c.claims.Upsert(o.DeepCopy())
	case *v1.PersistentVolume:
		b.c.volumes.Upsert(o.DeepCopy())
	case *storagev1.StorageClass:
		if err := b.c.factory.Storage().V1().StorageClasses().Informer().GetIndexer().Add(o.DeepCopy()); err != nil {
			b.t.Fatal(err)
		}
	case *v1.Node:
		b.c.nodeLoss.tracker.Observe(o.Name, o)
	}
}

// nodeGone tells the tracker a node was deleted, and deletes it on the
// API server.
func (b *lossBinder) nodeGone(name string) {
	b.c.nodeLoss.tracker.Observe(name, nil)
	if err := b.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.t.Fatal(err)
	}
}

// nodeBack makes a node again, on the API server and in the tracker.
func (b *lossBinder) nodeBack(n *v1.Node) {
	if _, err := b.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.t.Fatal(err)
	}
	b.cache(n)
}

// sync syncs a PV as a worker does, after taking the API server's copy of
// it into the cache (the PV's own events are not what these tests lag).
func (b *lossBinder) sync(name string) {
	b.t.Helper()
	if pv, err := b.client.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{}); err == nil {
		b.c.volumes.Upsert(pv)
	}
	if err := b.c.syncVolume(context.Background(), name); err != nil {
		b.t.Fatalf("sync %s: %v", name, err)
	}
}

func (b *lossBinder) pv(name string) *v1.PersistentVolume {
	b.t.Helper()
	pv, err := b.client.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		b.t.Fatalf("PV %s: %v", name, err)
	}
	return pv
}

// deletes lists the DELETE requests of a resource the binder sent.
func (b *lossBinder) deletes(resource string) []string {
	var out []string
	for _, a := range b.client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == resource {
			out = append(out, d.GetName())
		}
	}
	return out
}

func (b *lossBinder) events() []string {
	var out []string
	for len(b.recorder.Events) > 0 {
		out = append(out, <-b.recorder.Events)
	}
	return out
}

func releaseClass() *storagev1.StorageClass {
	return newClass("release", "local.csi.tether.dev", wffc(), func(sc *storagev1.StorageClass) {
		sc.Annotations = map[string]string{nodeloss.AnnPolicy: "true"}
	})
}

// marked gives a PV the marks of a loss of node since t0, for claim uid,
// released or not.
func marked(pv *v1.PersistentVolume, node, uid string, released bool) *v1.PersistentVolume {
	pv.Annotations = map[string]string{nodeloss.AnnLostNode: node, nodeloss.AnnLostSince: lossT0.Format(time.RFC3339),
		nodeloss.AnnLostClaim: uid, nodeloss.AnnReleaseAfter: lossT0.Add(lossGrace).Format(time.RFC3339)}
	if released {
		pv.Annotations[nodeloss.AnnReleased] = lossT0.Add(lossGrace).Format(time.RFC3339)
	}
	return pv
}

// TestNodeLossReturnAfterClaimDeleteSentKeepsTheRelease (defect 1): the
// binder sent the released claim's DELETE; pvc-protection holds the claim
// (a pod on the node uses it); the node comes back before the claim's
// update reaches the cache. The cache says "not deleted, node back": the
// API server says the deletion was sent, and the release goes on, its
// mark kept (without it the PV would get a DeleteVolume on the returned
// node). A claim still live on the API server is cancelled as before.
func TestNodeLossReturnAfterClaimDeleteSentKeepsTheRelease(t *testing.T) {
	for _, server := range []string{"Terminating", "gone", "live"} {
		t.Run("claim "+server+" on the API server", func(t *testing.T) {
			claim, pv := boundPair("data-0", "release", "node-2", v1.PersistentVolumeReclaimDelete)
			marked(pv, "node-2", string(claim.UID), true)
			b := newLossBinder(t, releaseClass(), claim, pv)
			b.nodeGone("node-2")
			b.now = lossT0.Add(2 * lossGrace)
			// The API server's claim: what pvc-protection made of the DELETE.
			b.client.PrependReactor("delete", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if server != "Terminating" {
					return false, nil, nil
				}
				c := claim.DeepCopy()
				ts := metav1.NewTime(b.now)
				c.DeletionTimestamp, c.Finalizers = &ts, []string{"kubernetes.io/pvc-protection"}
				return true, nil, b.client.Tracker().Update(a.GetResource(), c, c.Namespace)
			})
			if server != "live" {
				b.sync(pv.Name) // DeleteClaim
				if got := b.deletes("persistentvolumeclaims"); !slices.Equal(got, []string{claim.Name}) {
					t.Fatalf("claim deletions %v, want [%s]", got, claim.Name)
				}
			}
			// The node is back; the cache still holds the claim as it was.
			b.nodeBack(lossNode("node-2", nil))
			b.sync(pv.Name)
			got := b.pv(pv.Name)
			if server == "live" {
				if nodeloss.Marked(got) {
					t.Errorf("a release whose claim's deletion was never sent was not cancelled: %v", got.Annotations)
				}
				return
			}
			if !nodeloss.Released(got) || got.Annotations[nodeloss.AnnLostClaim] != string(claim.UID) {
				t.Errorf("the node's return after the claim's DELETE removed the release's marks: %v", got.Annotations)
			}
		})
	}
}

// TestNodeLossChurnedNodesAreForgotten (defect 2): 2,000 nodes come and
// go; the tracker keeps the nodes that exist and those deleted within
// twice the grace, and a restart's first lists queue only the PVs whose
// node loss is under way.
func TestNodeLossChurnedNodesAreForgotten(t *testing.T) {
	var objs []runtime.Object
	objs = append(objs, releaseClass(), lossNode("node-1", nil))
	for i := range 50 {
		claim, pv := boundPair(fmt.Sprintf("data-%d", i), "release", "node-1", v1.PersistentVolumeReclaimDelete)
		objs = append(objs, claim, pv)
	}
	b := newLossBinder(t, objs...)
	for i := range 2000 {
		name := fmt.Sprintf("spot-%d", i)
		b.cache(lossNode(name, nil))
		b.now = b.now.Add(10 * time.Second)
		b.c.nodeLoss.tracker.Observe(name, nil)
	}
	// 2,000 deletions 10 s apart: those of the last two hours are kept.
	n, most := b.c.nodeLoss.tracker.Len(), 1+int(2*lossGrace/(10*time.Second))+1
	t.Logf("the tracker holds %d nodes after 2,000 deletions 10 s apart", n)
	if n > most {
		t.Errorf("the tracker holds %d nodes after 2,000 came and went, want at most %d", n, most)
	}
	b.c.queueFirstLists()
	if n := b.c.volumeQueue.Len(); n != 0 {
		t.Errorf("%d volumes queued at start, want 0 (every pair settled, no node of theirs lost)", n)
	}
}

// TestNodeLossLateOptIn (defect 3): a class that opts in after its node
// was lost releases that node's claims: the class's change queues its
// volumes whose node is lost (and TestNodeLossResyncOfSettledVolumeOnLostNode:
// a settled volume's resync is not skipped while its node is lost).
func TestNodeLossLateOptIn(t *testing.T) {
	plain := newClass("release", "local.csi.tether.dev", wffc())
	claim, pv := boundPair("data-0", "release", "node-2", v1.PersistentVolumeReclaimDelete)
	client := fake.NewClientset(plain, claim, pv, lossNode("node-1", nil), lossNode("node-2", outOfService))
	v := &versions{tracker: client.Tracker(), next: 1000}
	client.PrependReactor("update", "*", v.update)
	client.PrependReactor("patch", "persistentvolumes", v.patch)
	c, err := New(Options{Client: client, Workers: 2, Recorder: record.NewFakeRecorder(100), NodeLossGrace: lossGrace})
	if err != nil {
		t.Fatal(err)
	}
	ctx := runController(t, c)
	if !pollUntil(10*time.Second, c.Synced) {
		t.Fatal("the binder did not sync")
	}
	// Settled, its node lost, its class without the policy: nothing.
	if !pollUntil(10*time.Second, func() bool { return c.volumeQueue.Len() == 0 }) {
		t.Fatal("the queue did not drain")
	}
	if got, _ := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); nodeloss.Marked(got) {
		t.Fatalf("marked before the class opted in: %v", got.Annotations)
	}
	// The admin opts the class in.
	opted := releaseClass()
	opted.ResourceVersion = "2"
	if _, err := client.StorageV1().StorageClasses().Update(ctx, opted, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ok := pollUntil(10*time.Second, func() bool {
		got, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err == nil && got.Annotations[nodeloss.AnnLostNode] == "node-2" && got.Annotations[nodeloss.AnnLostClaim] == string(claim.UID)
	})
	if !ok {
		t.Fatal("a class that opted in after its node was lost: its volume is not marked")
	}
}

// TestNodeLossResyncOfSettledVolumeOnLostNode: the volume handler skips a
// settled volume's resync, but not while its node loss is under way.
func TestNodeLossResyncOfSettledVolumeOnLostNode(t *testing.T) {
	claim, pv := boundPair("data-0", "release", "node-2", v1.PersistentVolumeReclaimDelete)
	b := newLossBinder(t, releaseClass(), claim, pv, lossNode("node-2", nil))
	h := b.c.volumeHandler()
	cached, _ := b.c.volumes.Get(pv.Name)
	h.OnUpdate(cached, cached)
	if n := b.c.volumeQueue.Len(); n != 0 {
		t.Fatalf("a settled volume's resync was queued (%d)", n)
	}
	b.nodeGone("node-2")
	h.OnUpdate(cached, cached)
	if n := b.c.volumeQueue.Len(); n != 1 {
		t.Fatalf("a settled volume's resync with its node lost: %d queued, want 1", n)
	}
}

// TestNodeLossZonalVolumeKeepsItsClaim (defect 4): a volume whose affinity
// names a zone that holds one node is not that node's: when the node is
// deleted, and when another joins the zone, nothing is marked; marks an
// older binder wrote on it are removed before any deletion.
func TestNodeLossZonalVolumeKeepsItsClaim(t *testing.T) {
	zoned := func(name string) *v1.Node {
		return lossNode(name, func(n *v1.Node) { n.Labels["topology.kubernetes.io/zone"] = "zone-a" })
	}
	claim, pv := boundPair("data-0", "release", "", v1.PersistentVolumeReclaimDelete)
	pvNode("topology.kubernetes.io/zone", "zone-a")(pv)
	claim2, pv2 := boundPair("data-1", "release", "", v1.PersistentVolumeReclaimDelete)
	pvNode("topology.kubernetes.io/zone", "zone-a")(pv2)
	marked(pv2, "node-2", string(claim2.UID), true)
	b := newLossBinder(t, releaseClass(), claim, pv, claim2, pv2, zoned("node-2"), lossNode("node-1", nil))
	b.nodeGone("node-2")
	for _, at := range []time.Duration{0, lossGrace + time.Minute, lossGrace + 2*time.Minute} {
		b.now = lossT0.Add(at)
		b.sync(pv.Name)
		b.sync(pv2.Name)
	}
	if got := b.pv(pv.Name); nodeloss.Marked(got) {
		t.Errorf("a zonal volume was marked for its zone's one node: %v", got.Annotations)
	}
	if got := b.pv(pv2.Name); nodeloss.Marked(got) {
		t.Errorf("an older binder's marks on a zonal volume were kept: %v", got.Annotations)
	}
	b.nodeBack(zoned("node-3"))
	b.sync(pv.Name)
	if d := b.deletes("persistentvolumeclaims"); len(d) > 0 {
		t.Errorf("claims of zonal volumes deleted: %v", d)
	}
	if d := b.deletes("persistentvolumes"); len(d) > 0 {
		t.Errorf("zonal PVs deleted: %v", d)
	}
}

// TestNodeLossReboundRetainVolumeIsANewCase (defect 5): a Retain PV kept
// after a release carries its marks; the admin binds it to a new claim
// while the node is still gone. The new claim is a case of its own: its
// NodeLost event, and a full grace from when the binder saw it bound.
func TestNodeLossReboundRetainVolumeIsANewCase(t *testing.T) {
	claim, pv := boundPair("data-new", "release", "node-2", v1.PersistentVolumeReclaimRetain)
	marked(pv, "node-2", "uid-old", true)
	pv.Finalizers = nil
	b := newLossBinder(t, releaseClass(), claim, pv)
	b.nodeGone("node-2")
	b.now = lossT0.Add(5 * lossGrace)
	b.sync(pv.Name)
	got := b.pv(pv.Name)
	if got.Annotations[nodeloss.AnnLostClaim] != string(claim.UID) || nodeloss.Released(got) ||
		got.Annotations[nodeloss.AnnLostSince] != b.now.Format(time.RFC3339) {
		t.Fatalf("the rebound claim is not a new case timed from now (%s): %v", b.now.Format(time.RFC3339), got.Annotations)
	}
	if d := b.deletes("persistentvolumeclaims"); len(d) > 0 {
		t.Fatalf("the rebound claim was deleted at once: %v", d)
	}
	if ev := strings.Join(b.events(), "\n"); !strings.Contains(ev, ReasonNodeLost) {
		t.Errorf("no %s event for the rebound claim: %s", ReasonNodeLost, ev)
	}
	// Within its own grace: nothing; after it: released.
	b.now = b.now.Add(lossGrace - time.Minute)
	b.sync(pv.Name)
	if nodeloss.Released(b.pv(pv.Name)) {
		t.Fatal("the rebound claim was released within its own grace")
	}
	b.now = b.now.Add(2 * time.Minute)
	b.sync(pv.Name)
	if !nodeloss.Released(b.pv(pv.Name)) {
		t.Fatal("the rebound claim was not released after its own grace")
	}
}

// TestNodeLossUserDeletedClaimTakesTheUsualWay (defect 6): a claim the
// user deleted (gone, or Terminating) while its node is lost needs no
// release: nothing is marked, a loss mark not yet decided on is removed,
// the binder deletes no PV (its volume takes the usual Delete path, the
// driver's DeleteVolume once its node is back).
func TestNodeLossUserDeletedClaimTakesTheUsualWay(t *testing.T) {
	for _, tc := range []struct {
		name  string
		claim string // "gone" or "terminating"
		mark  bool
	}{{"claim gone", "gone", false}, {"claim gone, loss marked", "gone", true}, {"claim Terminating", "terminating", false}} {
		t.Run(tc.name, func(t *testing.T) {
			claim, pv := boundPair("data-0", "release", "node-2", v1.PersistentVolumeReclaimDelete)
			if tc.mark {
				marked(pv, "node-2", string(claim.UID), false)
			}
			objs := []runtime.Object{releaseClass(), pv}
			if tc.claim == "terminating" {
				ts := metav1.NewTime(lossT0)
				claim.DeletionTimestamp, claim.Finalizers = &ts, []string{"kubernetes.io/pvc-protection"}
				objs = append(objs, claim)
			} else {
				pv.Status.Phase = v1.VolumeReleased
			}
			b := newLossBinder(t, objs...)
			b.nodeGone("node-2")
			for _, at := range []time.Duration{0, 2 * lossGrace} {
				b.now = lossT0.Add(at)
				b.sync(pv.Name)
			}
			if got := b.pv(pv.Name); nodeloss.Marked(got) {
				t.Errorf("marks on the PV of a claim the user deleted: %v", got.Annotations)
			}
			if d := b.deletes("persistentvolumes"); len(d) > 0 {
				t.Errorf("the binder deleted PVs %v", d)
			}
			if d := b.deletes("persistentvolumeclaims"); len(d) > 0 {
				t.Errorf("the binder deleted claims %v", d)
			}
		})
	}
}

// TestNodeLossOptOutOnServerStopsTheClaimDeletion: an admin opts the
// class out after the release was decided; the binder's cache still says
// it opts in. The claim's deletion asks the API server, as for the node,
// and is not sent.
func TestNodeLossOptOutOnServerStopsTheClaimDeletion(t *testing.T) {
	claim, pv := boundPair("data-0", "release", "node-2", v1.PersistentVolumeReclaimDelete)
	marked(pv, "node-2", string(claim.UID), true)
	b := newLossBinder(t, releaseClass(), claim, pv)
	b.nodeGone("node-2")
	b.now = lossT0.Add(lossGrace + time.Minute)
	out := newClass("release", "local.csi.tether.dev", wffc())
	if _, err := b.client.StorageV1().StorageClasses().Update(context.Background(), out, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.sync(pv.Name)
	if d := b.deletes("persistentvolumeclaims"); len(d) > 0 {
		t.Errorf("claims deleted though the class opts in no more on the API server: %v", d)
	}
}

// TestNodeLossHostnamePinnedVolumeSurvivesARestart (found by the
// simulator's generated affinities, seed 559): a PV pinned by the
// kubernetes.io/hostname label of a node whose hostname is not its name
// (as on clouds) is marked; the node is deleted and the binder restarts.
// The new binder never saw the node, so the marks vouch for it: they
// record its hostname, and the release goes on after the grace. Before,
// the marks named the node only, the new binder found the PV pinned to no
// node, and cancelled: NodeBack for a node still gone, and the claim was
// never released.
func TestNodeLossHostnamePinnedVolumeSurvivesARestart(t *testing.T) {
	node := lossNode("ip-10-0-0-2.ec2.internal", func(n *v1.Node) { n.Labels[hostname] = "ip-10-0-0-2" })
	claim, pv := boundPair("data-0", "release", "ip-10-0-0-2", v1.PersistentVolumeReclaimDelete)
	b := newLossBinder(t, releaseClass(), claim, pv, node)
	b.nodeGone(node.Name)
	b.sync(pv.Name)
	marks := b.pv(pv.Name).Annotations
	if marks[nodeloss.AnnLostNode] != node.Name || marks[nodeloss.AnnLostHostname] != "ip-10-0-0-2" {
		t.Fatalf("marks %v, want the node's name and its hostname", marks)
	}

	// A new binder (a restart, or the standby taking the lease), which
	// never saw the node, after the grace.
	pvNow := b.pv(pv.Name)
	b2 := newLossBinder(t, releaseClass(), claim, pvNow)
	b2.now = lossT0.Add(lossGrace + time.Minute)
	b2.sync(pv.Name) // marked again: its grace starts at this binder's sight
	b2.now = b2.now.Add(lossGrace + time.Minute)
	b2.sync(pv.Name)
	b2.sync(pv.Name)
	got := b2.pv(pv.Name).Annotations
	if _, ok := got[nodeloss.AnnReleased]; !ok {
		t.Errorf("not released after the restart; marks %v, events %q", got, b2.events())
	}
	if got[nodeloss.AnnLostHostname] != "ip-10-0-0-2" {
		t.Errorf("the new binder dropped the hostname mark: %v", got)
	}
	if d := b2.deletes("persistentvolumeclaims"); !slices.Equal(d, []string{claim.Name}) {
		t.Errorf("claims deleted %v, want [%s]", d, claim.Name)
	}
}

// TestNodeLossTermNoNodeMeetsKeepsItsClaim (found by the simulator's
// generated affinities, seeds 2199 and 7464): a PV whose one term asks for
// node-2's hostname and for another host this binder never saw (deleted
// before it started) admits no node, node-2 included: its volume is on
// none that is known. node-2's loss does not release its claim (a Delete
// PV would have gone without DeleteVolume, its volume left where no sweep
// of node-2 reports it).
func TestNodeLossTermNoNodeMeetsKeepsItsClaim(t *testing.T) {
	claim, pv := boundPair("data-0", "release", "", v1.PersistentVolumeReclaimDelete)
	pv.Spec.NodeAffinity.Required.NodeSelectorTerms = []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
		{Key: hostname, Operator: v1.NodeSelectorOpIn, Values: []string{"node-2"}},
		{Key: hostname, Operator: v1.NodeSelectorOpIn, Values: []string{"node-1"}}}}}
	b := newLossBinder(t, releaseClass(), claim, pv, lossNode("node-2", outOfService))
	for _, at := range []time.Duration{0, lossGrace + time.Minute, 2*lossGrace + time.Minute} {
		b.now = lossT0.Add(at)
		b.sync(pv.Name)
	}
	if got := b.pv(pv.Name); nodeloss.Marked(got) {
		t.Errorf("a PV of a term no node meets was marked for node-2: %v", got.Annotations)
	}
	if d := b.deletes("persistentvolumeclaims"); len(d) > 0 {
		t.Errorf("claims deleted: %v", d)
	}
}
