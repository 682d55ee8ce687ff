package nodeloss

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	t0    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	grace = 5 * time.Minute
)

// pvOn is a PV bound to claim uid-1 with the given reclaim policy and
// marks; marks name claim uid-1 unless they say otherwise.
func pvOn(policy v1.PersistentVolumeReclaimPolicy, marks ...string) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1", Annotations: map[string]string{},
		Finalizers: []string{FinalizerDeletion}},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy,
			ClaimRef: &v1.ObjectReference{Namespace: "ns", Name: "data-web-0", UID: "uid-1"}}}
	if len(marks) > 0 {
		pv.Annotations[AnnLostClaim] = "uid-1"
	}
	for i := 0; i+1 < len(marks); i += 2 {
		pv.Annotations[marks[i]] = marks[i+1]
	}
	return pv
}

func boundClaim() *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data-web-0", UID: "uid-1"},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}}
}

func deleting(c *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	t := metav1.NewTime(t0)
	c.DeletionTimestamp = &t
	return c
}

func rfc(t time.Time) string { return t.Format(time.RFC3339) }

// TestDecideTable crosses the node states with the class's policy and the
// PV's reclaim policy, for a bound PV that carries no mark yet, one marked
// lost before the grace ended, and one marked lost past the grace.
func TestDecideTable(t *testing.T) {
	up := Node{Name: "node-2"}
	notReady := Node{Name: "node-2"} // NotReady without the taint: not lost
	oos := Node{Name: "node-2", Loss: OutOfService, Since: t0}
	gone := Node{Name: "node-2", Loss: Deleted, Since: t0}
	nodes := []struct {
		name string
		node Node
		lost bool
	}{{"Ready", up, false}, {"NotReady, no taint", notReady, false}, {"out-of-service", oos, true}, {"deleted", gone, true}}
	for _, n := range nodes {
		for _, policy := range []bool{false, true} {
			for _, reclaim := range []v1.PersistentVolumeReclaimPolicy{v1.PersistentVolumeReclaimDelete, v1.PersistentVolumeReclaimRetain} {
				for _, stage := range []string{"unmarked", "marked, in the grace", "marked, grace over"} {
					name := fmt.Sprintf("%s/policy=%v/%s/%s", n.name, policy, reclaim, stage)
					t.Run(name, func(t *testing.T) {
						pv := pvOn(reclaim)
						now := t0.Add(time.Minute)
						switch stage {
						case "marked, in the grace":
							pv = pvOn(reclaim, AnnLostNode, "node-2", AnnLostSince, rfc(t0))
						case "marked, grace over":
							pv = pvOn(reclaim, AnnLostNode, "node-2", AnnLostSince, rfc(t0))
							now = t0.Add(grace)
						}
						got := Decide(Input{PV: pv, Claim: boundClaim(), Policy: policy, Node: n.node, Now: now, Grace: grace})
						var want Op
						switch {
						case !policy || !n.lost:
							want = Nothing
							if stage != "unmarked" {
								want = Unmark
							}
						case stage == "unmarked":
							want = MarkLost
						case stage == "marked, in the grace":
							want = WaitGrace
						default:
							want = Release
						}
						if got.Op != want {
							t.Fatalf("got %s, want %s", got.Op, want)
						}
						if want == WaitGrace && !got.At.Equal(t0.Add(grace)) {
							t.Errorf("wait until %s, want %s", got.At, t0.Add(grace))
						}
						if want == MarkLost && !got.Since.Equal(t0) {
							t.Errorf("since %s, want %s", got.Since, t0)
						}
					})
				}
			}
		}
	}
}

// TestDecideFollow is the release after the decision, for both reclaim
// policies: the claim goes first, then the PV (Delete) or its finalizer.
func TestDecideFollow(t *testing.T) {
	released := func(reclaim v1.PersistentVolumeReclaimPolicy) *v1.PersistentVolume {
		return pvOn(reclaim, AnnLostNode, "node-2", AnnLostSince, rfc(t0), AnnReleased, rfc(t0.Add(grace)))
	}
	oos := Node{Name: "node-2", Loss: OutOfService, Since: t0}
	back := Node{Name: "node-2"}
	tests := []struct {
		name    string
		reclaim v1.PersistentVolumeReclaimPolicy
		pv      func(*v1.PersistentVolume)
		claim   *v1.PersistentVolumeClaim
		policy  bool
		node    Node
		want    Op
	}{
		{"Delete: the claim is deleted", v1.PersistentVolumeReclaimDelete, nil, boundClaim(), true, oos, DeleteClaim},
		{"Retain: the claim is deleted", v1.PersistentVolumeReclaimRetain, nil, boundClaim(), true, oos, DeleteClaim},
		{"node back before the claim's deletion: cancelled (if the API server agrees)", v1.PersistentVolumeReclaimDelete, nil, boundClaim(), true, back, Cancel},
		{"policy removed before the claim's deletion: cancelled (if the API server agrees)", v1.PersistentVolumeReclaimDelete, nil, boundClaim(), false, oos, Cancel},
		{"affinity pins another node before the claim's deletion: cancelled", v1.PersistentVolumeReclaimDelete, nil, boundClaim(), true,
			Node{Name: "node-3", Loss: Deleted, Since: t0}, Cancel},
		{"affinity pins no node any more: cancelled", v1.PersistentVolumeReclaimDelete, nil, boundClaim(), true, Node{}, Cancel},
		{"node unknown (restarted binder): the mark's node stands", v1.PersistentVolumeReclaimDelete, nil, boundClaim(), true,
			Node{Name: "node-2", Loss: Deleted, Since: t0}, DeleteClaim},
		{"claim Terminating (a pod on the node holds it)", v1.PersistentVolumeReclaimDelete, nil, deleting(boundClaim()), true, oos, WaitClaim},
		{"claim Terminating, node back: goes on", v1.PersistentVolumeReclaimDelete, nil, deleting(boundClaim()), true, back, WaitClaim},
		{"Delete, claim gone: the PV is deleted", v1.PersistentVolumeReclaimDelete, nil, nil, true, oos, DeleteVolume},
		{"Delete, claim gone, node back, policy removed: the PV is deleted all the same", v1.PersistentVolumeReclaimDelete, nil, nil, false, back, DeleteVolume},
		{"Delete, PV deleting: its finalizer goes", v1.PersistentVolumeReclaimDelete, func(pv *v1.PersistentVolume) {
			ts := metav1.NewTime(t0)
			pv.DeletionTimestamp = &ts
		}, nil, true, oos, DropFinalizer},
		{"Delete, PV deleting, no finalizer: nothing (pv-protection lets it go)", v1.PersistentVolumeReclaimDelete, func(pv *v1.PersistentVolume) {
			ts := metav1.NewTime(t0)
			pv.DeletionTimestamp = &ts
			pv.Finalizers = nil
		}, nil, true, oos, Nothing},
		{"Retain, claim gone: the finalizer goes, the PV stays", v1.PersistentVolumeReclaimRetain, nil, nil, true, oos, DropFinalizer},
		{"Retain, finalizer gone: kept", v1.PersistentVolumeReclaimRetain, func(pv *v1.PersistentVolume) { pv.Finalizers = nil }, nil, true, oos, Nothing},
		{"Recycle is kept as Retain", v1.PersistentVolumeReclaimRecycle, func(pv *v1.PersistentVolume) { pv.Finalizers = nil }, nil, true, oos, Nothing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pv := released(tt.reclaim)
			if tt.pv != nil {
				tt.pv(pv)
			}
			got := Decide(Input{PV: pv, Claim: tt.claim, Policy: tt.policy, Node: tt.node, Now: t0.Add(time.Hour), Grace: grace})
			if got.Op != tt.want {
				t.Errorf("got %s, want %s", got.Op, tt.want)
			}
		})
	}
}

// TestDecideEligible covers the PVs that are never released.
func TestDecideEligible(t *testing.T) {
	oos := Node{Name: "node-2", Loss: OutOfService, Since: t0}
	tests := []struct {
		name  string
		pv    func(*v1.PersistentVolume)
		claim *v1.PersistentVolumeClaim
		node  Node
		want  Op
	}{
		{"bound, node lost", nil, boundClaim(), oos, MarkLost},
		{"claim gone already (the user deleted it): its PV takes the usual way", nil, nil, oos, Nothing},
		{"claim being deleted by the user: its PV takes the usual way", nil, deleting(boundClaim()), oos, Nothing},
		{"claim made after the loss: its grace starts when it was made", nil, madeAt(boundClaim(), t0.Add(time.Hour)), oos, MarkLost},
		{"marks without lost-claim, claim alive, node back: removed", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "node-2", rfc(t0)
		}, boundClaim(), Node{Name: "node-2"}, Unmark},
		{"another claim's marks, the PV being bound again, node still lost: kept", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostClaim], pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "uid-0", "node-2", rfc(t0)
			pv.Spec.ClaimRef.UID = ""
		}, nil, oos, Nothing},
		{"another claim's marks, node back: removed", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostClaim], pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "uid-0", "node-2", rfc(t0)
		}, boundClaim(), Node{Name: "node-2"}, Unmark},
		{"another claim's marks, the new claim bound: a new case", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostClaim], pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "uid-0", "node-2", rfc(t0)
		}, boundClaim(), oos, MarkLost},
		{"no claimRef (Available)", func(pv *v1.PersistentVolume) { pv.Spec.ClaimRef = nil }, nil, oos, Nothing},
		{"pre-bound, no UID", func(pv *v1.PersistentVolume) { pv.Spec.ClaimRef.UID = "" }, nil, oos, Nothing},
		{"claim not bound to it (yet)", nil, &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}}, oos, Nothing},
		{"affinity names no single node", nil, boundClaim(), Node{}, Nothing},
		{"marked for another node: marked again", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostClaim], pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "uid-1", "node-3", rfc(t0)
		}, boundClaim(), oos, MarkLost},
		{"marked before this binder's first sight (it restarted): timed again from it", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostClaim], pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "uid-1", "node-2", rfc(t0.Add(-time.Hour))
		}, boundClaim(), oos, MarkLost},
		{"marked at this binder's first sight, to the second (the mark has no fraction): waits", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostClaim], pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "uid-1", "node-2", rfc(t0.Add(900*time.Millisecond))
		}, boundClaim(), Node{Name: "node-2", Loss: OutOfService, Since: t0.Add(900 * time.Millisecond)}, WaitGrace},
		{"marked at this binder's first sight: waits", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostClaim], pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "uid-1", "node-2", rfc(t0)
		}, boundClaim(), oos, WaitGrace},
		{"mark with an unreadable time: marked again", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostClaim], pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "uid-1", "node-2", "yesterday"
		}, boundClaim(), oos, MarkLost},
		{"unreadable mark, node back: unmarked", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostClaim], pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "uid-1", "node-2", "yesterday"
		}, boundClaim(), Node{Name: "node-2"}, Unmark},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pv := pvOn(v1.PersistentVolumeReclaimDelete)
			if tt.pv != nil {
				tt.pv(pv)
			}
			if got := Decide(Input{PV: pv, Claim: tt.claim, Policy: true, Node: tt.node, Now: t0, Grace: grace}); got.Op != tt.want {
				t.Errorf("got %s, want %s", got.Op, tt.want)
			}
		})
	}
}

// TestDecideGraceStart: when a claim's grace starts, as MarkLost writes it.
func TestDecideGraceStart(t *testing.T) {
	oos := Node{Name: "node-2", Loss: OutOfService, Since: t0}
	longAgo := Node{Name: "node-2", Loss: OutOfService, Since: t0.Add(-time.Hour)}
	tests := []struct {
		name  string
		pv    func(*v1.PersistentVolume)
		claim *v1.PersistentVolumeClaim
		node  Node
		since time.Time
	}{
		{"claim made after the loss: when it was made", nil, madeAt(boundClaim(), t0.Add(time.Hour)), oos, t0.Add(time.Hour)},
		{"claim made before the loss: the loss", nil, madeAt(boundClaim(), t0.Add(-time.Hour)), oos, t0},
		{"another claim's marks, the new claim bound, the node lost long before: now", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostClaim], pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "uid-0", "node-2", rfc(t0.Add(-time.Hour))
		}, boundClaim(), longAgo, t0},
		{"marks without lost-claim (an older binder's), claim alive: another claim's, now", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "node-2", rfc(t0.Add(-time.Hour))
		}, boundClaim(), longAgo, t0},
		{"marked a second before this binder's first sight: timed again from the sight", func(pv *v1.PersistentVolume) {
			pv.Annotations[AnnLostClaim], pv.Annotations[AnnLostNode], pv.Annotations[AnnLostSince] = "uid-1", "node-2", rfc(t0.Add(-time.Second))
		}, boundClaim(), oos, t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pv := pvOn(v1.PersistentVolumeReclaimDelete)
			if tt.pv != nil {
				tt.pv(pv)
			}
			got := Decide(Input{PV: pv, Claim: tt.claim, Policy: true, Node: tt.node, Now: t0, Grace: grace})
			if got.Op != MarkLost || !got.Since.Equal(tt.since) {
				t.Errorf("got %s from %s, want %s from %s", got.Op, got.Since, MarkLost, tt.since)
			}
		})
	}
}

func TestStateOf(t *testing.T) {
	seen := t0.Add(time.Hour)
	early := metav1.NewTime(t0)
	late := metav1.NewTime(seen.Add(time.Hour))
	taint := func(at *metav1.Time) *v1.Node {
		return &v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: v1.TaintNodeOutOfService, Value: "nodeshutdown",
			Effect: v1.TaintEffectNoExecute, TimeAdded: at}}}}
	}
	notReady := &v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionUnknown}}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}}}}
	tests := []struct {
		name string
		node *v1.Node
		want Node
	}{
		{"deleted", nil, Node{Name: "n", Loss: Deleted, Since: seen}},
		{"unreachable, NotReady: not lost", notReady, Node{Name: "n"}},
		{"out-of-service, no timeAdded", taint(nil), Node{Name: "n", Loss: OutOfService, Since: seen}},
		{"out-of-service since before", taint(&early), Node{Name: "n", Loss: OutOfService, Since: t0}},
		{"out-of-service, timeAdded in the future", taint(&late), Node{Name: "n", Loss: OutOfService, Since: seen}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StateOf("n", tt.node, seen); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func madeAt(c *v1.PersistentVolumeClaim, at time.Time) *v1.PersistentVolumeClaim {
	c.CreationTimestamp = metav1.NewTime(at)
	return c
}
