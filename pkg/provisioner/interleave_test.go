package provisioner

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/nodeloss"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	"github.com/tether-csi/tether/pkg/provisioner/records"
)

// The volume of the test claim.
const testVolume = "pvc-" + testUID

// want is the outcome of a scenario.
type want struct {
	// volumes the driver holds at the end.
	volumes []string
	// record: the claim still holds the in-flight record (false also when
	// the claim is gone).
	record bool
	// gone: the claim is gone from the API server.
	gone bool
	// event: a substring of an event, "" for no check.
	event string
}

func (e *env) check(w want) {
	e.t.Helper()
	if got := e.driver.volumes(); !slices.Equal(got, w.volumes) {
		e.t.Errorf("driver volumes %v, want %v", got, w.volumes)
	}
	c := e.apiClaim(testClaim)
	if (c == nil) != w.gone {
		e.t.Errorf("claim gone: %v, want %v", c == nil, w.gone)
	}
	if c != nil && inflight.Holds(c) != w.record {
		e.t.Errorf("in-flight record on the claim: %v, want %v (finalizers %v)", inflight.Holds(c), w.record, c.Finalizers)
	}
	if w.event != "" {
		evs := e.events()
		if !slices.ContainsFunc(evs, func(ev string) bool { return strings.Contains(ev, w.event) }) {
			e.t.Errorf("no event with %q in %v", w.event, evs)
		}
	}
}

// mustProvision provisions the test claim as cached and fails on error.
func (e *env) mustProvision() *v1.PersistentVolume {
	e.t.Helper()
	pv, _, err := e.provision(e.cachedClaim(testClaim))
	if err != nil {
		e.t.Fatalf("Provision: %v", err)
	}
	return pv
}

// bindTo is the binder binding the claim to a PV, dropping the record in
// the same write when the PV is the one the record names.
func (e *env) bindTo(pv *v1.PersistentVolume) {
	e.updateClaim(testClaim, func(c *v1.PersistentVolumeClaim) {
		c.Spec.VolumeName = pv.Name
		inflight.Settle(c, pv)
	})
}

// recycled is a provisioned PV of another, earlier claim, made available
// and pre-bound to the test claim by an admin.
func recycled() *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-recycled", Annotations: map[string]string{storagehelpers.AnnDynamicallyProvisioned: driverNm}},
		Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{Namespace: testNS, Name: testClaim, UID: testUID},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driverNm, VolumeHandle: "h-recycled"}}},
	}
}

// TestInterleavings walks the provision / record / save / settle /
// clean-up paths through the races that matter, one named row each.
func TestInterleavings(t *testing.T) {
	tests := []struct {
		name  string
		opts  []envOpt
		claim *v1.PersistentVolumeClaim
		steps func(e *env)
		want  want
	}{
		{
			name: "provisioned, saved, bound by the binder: the bind write drops the record",
			steps: func(e *env) {
				pv := e.mustProvision()
				e.savePV(pv)
				e.bindTo(pv)
				e.refresh()
				e.settle(testClaim)
			},
			want: want{volumes: []string{testVolume}},
		},
		{
			name: "provisioned and saved, bound by a binder that knows no record: the reconciler drops it",
			steps: func(e *env) {
				pv := e.mustProvision()
				e.savePV(pv)
				e.updateClaim(testClaim, func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName = pv.Name })
				e.refresh()
				e.settle(testClaim)
			},
			want: want{volumes: []string{testVolume}},
		},
		{
			name: "the reconciler meets a claim whose CreateVolume runs: it requeues without waiting",
			steps: func(e *env) {
				e.driver.during = func(*csi.CreateVolumeRequest) {
					e.refresh() // the record is visible
					e.settle(testClaim)
				}
				e.savePV(e.mustProvision())
				e.refresh()
				e.settle(testClaim)
			},
			want: want{volumes: []string{testVolume}, record: true}, // left for the binder's bind write
		},
		{
			name: "claim deleted while CreateVolume runs, PV saved: the PV tracks the volume, nothing deleted",
			steps: func(e *env) {
				e.driver.during = func(*csi.CreateVolumeRequest) { e.deleteClaim(testClaim); e.refresh(); e.settle(testClaim) }
				e.savePV(e.mustProvision())
				e.refresh()
				e.settle(testClaim)
			},
			want: want{volumes: []string{testVolume}, gone: true},
		},
		{
			name: "claim deleted while the library saves the PV: the reconciler waits for the save",
			steps: func(e *env) {
				pv := e.mustProvision()
				e.deleteClaim(testClaim)
				e.refresh()
				e.settle(testClaim) // no PV yet: the hand-off is recent
				if got := e.driver.volumes(); len(got) != 1 {
					e.t.Fatalf("the volume was deleted before the library could save its PV: %v", got)
				}
				e.savePV(pv)
				e.refresh()
				e.settle(testClaim)
			},
			want: want{volumes: []string{testVolume}, gone: true},
		},
		{
			name: "claim deleted and the library never saves the PV: clean-up after the grace",
			steps: func(e *env) {
				e.mustProvision()
				e.deleteClaim(testClaim)
				e.refresh()
				e.settle(testClaim)
				e.clock = e.clock.Add(records.SaveGrace + records.SaveRecheck)
				e.settle(testClaim)
			},
			want: want{gone: true},
		},
		{
			name: "CreateVolume times out, claim deleted, provisioner restarted: clean-up finds the volume again and deletes it",
			steps: func(e *env) {
				e.driver.fail, e.driver.made = timeoutErr, true
				if _, state, err := e.provision(e.cachedClaim(testClaim)); err == nil || state != controller.ProvisioningInBackground {
					e.t.Fatalf("Provision: %v %v, want a background state", state, err)
				}
				e.restart()
				e.driver.fail, e.driver.made = nil, false
				e.deleteClaim(testClaim)
				e.refresh()
				e.settle(testClaim)
			},
			want: want{gone: true},
		},
		{
			name: "CreateVolume fails for good: the record stays (an earlier call may have made the volume); deleted, the claim goes",
			steps: func(e *env) {
				e.driver.fail = status.Error(codes.InvalidArgument, "no such parameter")
				if _, state, err := e.provision(e.cachedClaim(testClaim)); err == nil || state != controller.ProvisioningFinished {
					e.t.Fatalf("Provision: %v %v, want a final error", state, err)
				}
				if !inflight.Holds(e.apiClaim(testClaim)) {
					e.t.Fatal("the record went with a final error")
				}
				e.deleteClaim(testClaim)
				e.refresh()
				creates := e.driver.createCount()
				e.settle(testClaim) // every call answered final: no volume, no driver call
				if e.driver.createCount() != creates {
					e.t.Error("the clean-up repeated a CreateVolume that every call had answered final")
				}
			},
			want: want{gone: true},
		},
		{
			// Defect 5 of issue 12.
			name: "a library retry with a stale claim after the clean-up: no CreateVolume for the deleted claim",
			steps: func(e *env) {
				e.driver.fail, e.driver.made = timeoutErr, true
				e.provision(e.cachedClaim(testClaim))
				stale := e.cachedClaim(testClaim) // holds the record, not deleted
				e.driver.fail, e.driver.made = nil, false
				e.deleteClaim(testClaim)
				e.refresh()
				e.clock = e.clock.Add(records.SaveGrace + records.SaveRecheck)
				e.settle(testClaim)
				e.refresh()
				creates := e.driver.createCount()
				_, _, err := e.provision(stale)
				var ignored *controller.IgnoredError
				if !errors.As(err, &ignored) || e.driver.createCount() != creates {
					e.t.Errorf("Provision on a stale claim: err %v, %d CreateVolume calls after the clean-up", err, e.driver.createCount()-creates)
				}
			},
			want: want{gone: true},
		},
		{
			// Defect 5, the cache has seen the deletion, the library has not.
			name: "a library call with a claim the cache knows is being deleted: refused",
			steps: func(e *env) {
				stale := e.cachedClaim(testClaim)
				e.updateClaim(testClaim, func(c *v1.PersistentVolumeClaim) { c.Finalizers = append(c.Finalizers, "kubernetes.io/pvc-protection") })
				e.deleteClaim(testClaim)
				e.refresh()
				_, _, err := e.provision(stale)
				var ignored *controller.IgnoredError
				if !errors.As(err, &ignored) || e.driver.createCount() != 0 {
					e.t.Errorf("Provision: err %v, %d CreateVolume calls", err, e.driver.createCount())
				}
			},
			want: want{},
		},
		{
			// Defect 2 of issue 12.
			name: "deleted claim whose released Retain PV lost its claim UID: the volume is tracked, never deleted",
			steps: func(e *env) {
				pv := e.mustProvision()
				pv.Spec.ClaimRef.UID = "" // the binder released it and cleared the UID
				e.savePV(pv)
				e.deleteClaim(testClaim)
				e.refresh()
				e.clock = e.clock.Add(records.SaveGrace + records.SaveRecheck)
				e.settle(testClaim)
			},
			want: want{volumes: []string{testVolume}, gone: true},
		},
		{
			// Defect 2: two claims whose shortened UIDs collide.
			name: "volume names collide under --volume-name-uuid-length: Provision refuses, clean-up never deletes the other claim's volume",
			opts: []envOpt{uuidLen(8)},
			steps: func(e *env) {
				other := newClaim()
				other.Name, other.UID = "first", types.UID("4f9d1c2e-0000-4c8d-9e0f-000000000000")
				e.createClaim(other)
				first, _, err := e.p.Provision(e.ctx, controller.ProvisionOptions{StorageClass: e.class, PVC: e.cachedClaim("first")})
				if err != nil {
					e.t.Fatal(err)
				}
				e.savePV(first)
				e.refresh()
				if _, _, err := e.provision(e.cachedClaim(testClaim)); err == nil || !strings.Contains(err.Error(), "taken") {
					e.t.Errorf("Provision of the colliding claim: %v", err)
				}
				// A record of the same name (from before the PV was saved).
				e.updateClaim(testClaim, func(c *v1.PersistentVolumeClaim) { inflight.Record(c, driverNm, first.Name) })
				e.deleteClaim(testClaim)
				e.refresh()
				e.settle(testClaim)
			},
			want: want{volumes: []string{"pvc-4f9d1c2e"}, gone: true},
		},
		{
			// Defect 3 of issue 12.
			name: "claim bound to a recycled volume while its CreateVolume runs: its own volume is unused, deleted, and the record goes",
			steps: func(e *env) {
				e.savePV(recycled())
				e.driver.fail, e.driver.made = timeoutErr, true
				e.driver.during = func(*csi.CreateVolumeRequest) { e.bindTo(recycled()) }
				e.provision(e.cachedClaim(testClaim))
				if c := e.apiClaim(testClaim); !inflight.Holds(c) {
					e.t.Fatalf("the record went with the bind to another volume: %v", c.Finalizers)
				}
				e.driver.fail, e.driver.during = nil, nil
				e.refresh()
				e.settle(testClaim)
			},
			want: want{event: "VolumeInFlightUnused"},
		},
		{
			name: "a PV saved but not yet in the cache when the claim is deleted: the API server is asked, nothing deleted",
			steps: func(e *env) {
				pv := e.mustProvision()
				e.restart() // no hand-off memory
				e.deleteClaim(testClaim)
				e.refresh()
				e.savePV(pv) // the cache does not show it
				e.settle(testClaim)
			},
			want: want{volumes: []string{testVolume}, gone: true},
		},
		{
			name: "a record of an older tether (no volume named): clean-up uses the name from the claim's UID",
			steps: func(e *env) {
				e.updateClaim(testClaim, func(c *v1.PersistentVolumeClaim) { c.Finalizers = append(c.Finalizers, inflight.Finalizer) })
				e.driver.CreateVolume(e.ctx, &csi.CreateVolumeRequest{Name: testVolume})
				e.deleteClaim(testClaim)
				e.refresh()
				e.settle(testClaim)
			},
			want: want{gone: true},
		},
		{
			name: "node mode: the claim's selected node is deleted: the record goes after the node-loss grace with an event, no driver call",
			opts: []envOpt{nodeMode("node-2")},
			claim: newClaim(claimAnn(storagehelpers.AnnSelectedNode, "node-1"), func(c *v1.PersistentVolumeClaim) {
				inflight.Record(c, driverNm, testVolume)
			}),
			steps: func(e *env) {
				e.deleteClaim(testClaim)
				e.refresh()
				e.settle(testClaim)
				if !e.holdsRecord(testClaim) {
					e.t.Error("the record went before the node-loss grace")
				}
				e.clock = e.clock.Add(nodeloss.DefaultGrace)
				e.settle(testClaim)
			},
			want: want{gone: true, event: "VolumeInFlightNodeGone"},
		},
		{
			name: "node mode: the record's node is tainted out-of-service: the record goes after the grace, no driver call",
			opts: []envOpt{nodeMode("node-2")},
			claim: newClaim(claimAnn(storagehelpers.AnnSelectedNode, "node-1"), func(c *v1.PersistentVolumeClaim) {
				inflight.Record(c, driverNm, testVolume)
			}),
			steps: func(e *env) {
				e.createNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: v1.NodeSpec{Taints: []v1.Taint{
					{Key: v1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute}}}})
				e.deleteClaim(testClaim)
				e.refresh()
				e.settle(testClaim)
				e.clock = e.clock.Add(nodeloss.DefaultGrace - time.Second)
				e.settle(testClaim)
				if !e.holdsRecord(testClaim) {
					e.t.Error("the record went before the node-loss grace")
				}
				e.clock = e.clock.Add(time.Second)
				e.settle(testClaim)
			},
			want: want{gone: true, event: "VolumeInFlightNodeGone"},
		},
		{
			name: "node mode: the record's node is NotReady without the taint: left to that node's provisioner",
			opts: []envOpt{nodeMode("node-2")},
			claim: newClaim(claimAnn(storagehelpers.AnnSelectedNode, "node-1"), func(c *v1.PersistentVolumeClaim) {
				inflight.Record(c, driverNm, testVolume)
			}),
			steps: func(e *env) {
				e.createNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
					Spec:   v1.NodeSpec{Taints: []v1.Taint{{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}}},
					Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionUnknown}}}})
				e.deleteClaim(testClaim)
				e.refresh()
				e.settle(testClaim)
				e.clock = e.clock.Add(time.Hour)
				e.settle(testClaim)
			},
			want: want{record: true},
		},
		{
			name: "node mode: another node's claim whose node lives: left to that node's provisioner",
			opts: []envOpt{nodeMode("node-2")},
			claim: newClaim(claimAnn(storagehelpers.AnnSelectedNode, "node-1"), func(c *v1.PersistentVolumeClaim) {
				inflight.Record(c, driverNm, testVolume)
			}),
			steps: func(e *env) {
				if _, err := e.client.CoreV1().Nodes().Create(e.ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
					e.t.Fatal(err)
				}
				e.deleteClaim(testClaim)
				e.refresh()
				e.settle(testClaim)
			},
			want: want{record: true},
		},
		{
			// Defect 4 of issue 12: the clean-up needed a live source. The
			// cloning protection keeps the source claim while it is deleted,
			// and the clean-up reads it again (issue 24: not the record).
			name: "a clone deleted while its source is being deleted: clean-up repeats the create from the source claim",
			opts: []envOpt{cloning()},
			claim: newClaim(func(c *v1.PersistentVolumeClaim) {
				inflight.Record(c, driverNm, testVolume)
				c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "source"}
			}),
			steps: func(e *env) {
				src := newClaim(func(c *v1.PersistentVolumeClaim) {
					c.Name, c.UID, c.Spec.VolumeName = "source", "source-uid", "pvc-source"
					c.Status.Phase = v1.ClaimBound
					c.Finalizers = []string{protect.FinalizerCloneSource}
				})
				e.createClaim(src)
				e.deleteClaim("source")
				e.savePV(&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-source"},
					Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driverNm, VolumeHandle: "h-source"}}}})
				e.driver.CreateVolume(e.ctx, &csi.CreateVolumeRequest{Name: testVolume})
				e.deleteClaim(testClaim)
				e.refresh()
				e.settle(testClaim)
				last := e.driver.creates[len(e.driver.creates)-1]
				if last.GetVolumeContentSource().GetVolume().GetVolumeId() != "h-source" {
					e.t.Errorf("the clean-up's CreateVolume has source %v", last.GetVolumeContentSource())
				}
			},
			want: want{gone: true},
		},
		{
			name: "another driver's record: left alone",
			claim: newClaim(func(c *v1.PersistentVolumeClaim) {
				inflight.Record(c, "other.csi", testVolume)
			}),
			steps: func(e *env) {
				e.deleteClaim(testClaim)
				e.refresh()
				e.settle(testClaim)
				if e.driver.createCount() != 0 {
					e.t.Error("CreateVolume for another driver's record")
				}
			},
			want: want{record: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.opts...)
			claim := tt.claim
			if claim == nil {
				claim = newClaim()
			}
			e.createClaim(claim)
			tt.steps(e)
			e.check(tt.want)
		})
	}
}

// Switching back to the upstream pair: records whose PV is saved go at
// once; a claim still waiting for its volume is named and keeps its record.
func TestHandBack(t *testing.T) {
	e := newEnv(t)
	e.createClaim(newClaim())
	e.savePV(e.mustProvision()) // saved, not yet bound
	waiting := newClaim(func(c *v1.PersistentVolumeClaim) {
		c.Name, c.UID = "waiting", types.UID("11111111-2222-3333-4444-555555555555")
		inflight.Record(c, driverNm, "pvc-"+string(c.UID))
	})
	e.createClaim(waiting)
	e.refresh()
	left, err := e.r.HandBack(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []string{testNS + "/waiting"}) {
		t.Errorf("claims left holding the record: %v, want only %s/waiting", left, testNS)
	}
	e.check(want{volumes: []string{testVolume}})
}

// ResourceExhausted on a selected node reschedules (drops selected-node)
// only for a driver that takes topology, as EP does; for one that does
// not, the node did not matter and the error is final.
func TestResourceExhaustedReschedulesOnlyWithTopology(t *testing.T) {
	for _, topology := range []bool{false, true} {
		e := newEnv(t, func(o *Options) { o.Topology = topology })
		e.createClaim(newClaim(claimAnn(storagehelpers.AnnSelectedNode, "node-1")))
		e.driver.fail = status.Error(codes.ResourceExhausted, "full")
		_, state, _ := e.provision(e.cachedClaim(testClaim))
		_, selected := e.apiClaim(testClaim).Annotations[storagehelpers.AnnSelectedNode]
		if want := controller.ProvisioningReschedule; topology && (state != want || selected) {
			t.Errorf("with topology: state %v, selected-node kept %v; want a reschedule", state, selected)
		}
		if !topology && (state != controller.ProvisioningFinished || !selected) {
			t.Errorf("without topology: state %v, selected-node kept %v; want a final error", state, selected)
		}
	}
}

// The library saves the PV with a claimRef made from its own copy of the
// claim, which predates the in-flight write. Saved through LibraryClient,
// the PV names the version of that write instead: the binder, which waits
// until its cache has the claimRef's version (inflight.ClaimBehindVolume),
// then binds from the claim with the record, and its write does not
// conflict.
func TestSavedPVNamesTheInFlightWrite(t *testing.T) {
	e := newEnv(t)
	e.createClaim(newClaim())
	libraryCopy := e.cachedClaim(testClaim)
	pv, _, err := e.provision(libraryCopy)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	written := e.apiClaim(testClaim).ResourceVersion
	if written == libraryCopy.ResourceVersion {
		t.Fatalf("Provision wrote no in-flight record (claim still at version %s)", written)
	}
	pv = pv.DeepCopy()
	pv.Spec.ClaimRef.ResourceVersion = libraryCopy.ResourceVersion // as the library sets it
	saved, err := e.p.LibraryClient(e.client).CoreV1().PersistentVolumes().Create(e.ctx, pv, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := saved.Spec.ClaimRef.ResourceVersion; got != written {
		t.Errorf("saved claimRef names version %s of the claim, want %s (the in-flight write's)", got, written)
	}
}
