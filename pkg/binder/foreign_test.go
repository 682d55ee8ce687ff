package binder

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

var foreignStart = time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)

func mfEntry(manager string, at time.Time, subresource, fields string) metav1.ManagedFieldsEntry {
	t := metav1.NewTime(at)
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: &t, Subresource: subresource, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
}

const (
	fieldsClaimBind  = `{"f:metadata":{"f:annotations":{".":{},"f:pv.kubernetes.io/bind-completed":{},"f:pv.kubernetes.io/bound-by-controller":{}}},"f:spec":{"f:volumeName":{}}}`
	fieldsPhase      = `{"f:status":{"f:accessModes":{},"f:capacity":{".":{},"f:storage":{}},"f:phase":{}}}`
	fieldsPVClaimRef = `{"f:metadata":{"f:annotations":{"f:pv.kubernetes.io/bound-by-controller":{}}},"f:spec":{"f:claimRef":{".":{},"f:name":{},"f:namespace":{},"f:uid":{}}}}`
	fieldsResize     = `{"f:status":{"f:allocatedResources":{".":{},"f:storage":{}},"f:conditions":{}}}`
	fieldsFinalizer  = `{"f:metadata":{"f:finalizers":{".":{},"v:\"kubernetes.io/pvc-protection\"":{}}}}`
)

func foreignPendingClaim() *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid-c"},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}
}

func foreignBoundClaim(entries ...metav1.ManagedFieldsEntry) *v1.PersistentVolumeClaim {
	c := foreignPendingClaim()
	c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"}
	c.Spec.VolumeName = "pv"
	c.Status.Phase = v1.ClaimBound
	c.ManagedFields = entries
	return c
}

func TestForeignBinderWrite(t *testing.T) {
	after, before := foreignStart.Add(time.Minute), foreignStart.Add(-90*24*time.Hour)
	freePV := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable}}
	claimedPV := func(entries ...metav1.ManagedFieldsEntry) *v1.PersistentVolume {
		pv := freePV.DeepCopy()
		pv.Annotations = map[string]string{"pv.kubernetes.io/bound-by-controller": "yes"}
		pv.Spec.ClaimRef = &v1.ObjectReference{Namespace: "ns", Name: "c", UID: "uid-c"}
		pv.ManagedFields = entries
		return pv
	}
	slimBound := foreignBoundClaim()
	markSlim(&slimBound.ObjectMeta, false)
	// A brownfield claim: KCM bound it months ago; since the switch KCM's
	// expansion controller wrote its status (KCM's status entry is new
	// and still owns the phase it set then).
	brownfield := foreignBoundClaim(mfEntry("kube-controller-manager", before, "", fieldsClaimBind),
		mfEntry("kube-controller-manager", after, "status", `{"f:status":{"f:allocatedResources":{".":{},"f:storage":{}},"f:phase":{}}}`))

	for _, tc := range []struct {
		name        string
		prev, obj   metav1.Object
		want        BindingFields
		wantManager string
	}{
		{name: "KCM binds a claim after the start",
			prev: foreignPendingClaim(),
			obj:  foreignBoundClaim(mfEntry("kube-controller-manager", after, "", fieldsClaimBind), mfEntry("kube-controller-manager", after, "status", fieldsPhase)),
			want: FieldVolumeName | FieldBindCompleted | FieldBoundByController | FieldPhase, wantManager: "kube-controller-manager"},
		{name: "KCM claims a PV after the start",
			prev: freePV,
			obj:  claimedPV(mfEntry("kube-controller-manager", after, "", fieldsPVClaimRef)),
			want: FieldClaimRef | FieldBoundByController, wantManager: "kube-controller-manager"},
		{name: "KCM's write in the second the binder started counts",
			prev: freePV,
			obj:  claimedPV(mfEntry("kube-controller-manager", foreignStart.Truncate(time.Second), "", fieldsPVClaimRef)),
			want: FieldClaimRef | FieldBoundByController, wantManager: "kube-controller-manager"},
		{name: "tether's binder binds",
			prev: foreignPendingClaim(),
			obj:  foreignBoundClaim(mfEntry("tether-binder", after, "", fieldsClaimBind), mfEntry("tether-binder", after, "status", fieldsPhase))},
		{name: "an older tether binder (rollback) binds: same manager, never foreign",
			prev: foreignPendingClaim(),
			obj:  foreignBoundClaim(mfEntry("tether-binder", before, "", fieldsClaimBind), mfEntry("binder", after, "status", fieldsPhase))},
		{name: "brownfield: KCM's old binding entries, tether writes the phase",
			prev: foreignBoundClaim(),
			obj: func() metav1.Object {
				c := foreignBoundClaim(mfEntry("kube-controller-manager", before, "", fieldsClaimBind), mfEntry("tether-binder", after, "status", fieldsPhase))
				c.Status.Phase = v1.ClaimLost
				return c
			}()},
		{name: "brownfield: KCM's old entries, first seen (no previous copy)",
			prev: nil,
			obj:  foreignBoundClaim(mfEntry("kube-controller-manager", before, "", fieldsClaimBind), mfEntry("kube-controller-manager", before, "status", fieldsPhase))},
		{name: "brownfield: KCM's old binding entry, a binding field changed by a user",
			prev: foreignBoundClaim(),
			obj: func() metav1.Object {
				c := foreignBoundClaim(mfEntry("kube-controller-manager", before, "", fieldsClaimBind),
					mfEntry("kubectl-edit", after, "", `{"f:metadata":{"f:annotations":{"f:pv.kubernetes.io/bound-by-controller":{}}}}`))
				delete(c.Annotations, "pv.kubernetes.io/bound-by-controller")
				return c
			}()},
		{name: "brownfield: KCM's expansion writes the status of a claim KCM bound, nothing binding changes",
			prev: slimBound, obj: brownfield},
		{name: "KCM's protection controller adds its finalizer after the start",
			prev: foreignPendingClaim(),
			obj: func() metav1.Object {
				c := foreignPendingClaim()
				c.Finalizers = []string{"kubernetes.io/pvc-protection"}
				c.ManagedFields = []metav1.ManagedFieldsEntry{mfEntry("kube-controller-manager", after, "", fieldsFinalizer)}
				return c
			}()},
		{name: "KCM's resize after the start, the claim bound by tether",
			prev: foreignBoundClaim(),
			obj:  foreignBoundClaim(mfEntry("tether-binder", before, "", fieldsClaimBind), mfEntry("kube-controller-manager", after, "status", fieldsResize))},
		{name: "a provisioner writes a pre-bound PV's claimRef",
			prev: freePV,
			obj:  claimedPV(mfEntry("tether-provisioner", after, "", fieldsPVClaimRef))},
		{name: "a change KCM made before the start, first seen after a relist",
			prev: freePV,
			obj:  claimedPV(mfEntry("kube-controller-manager", foreignStart.Add(-2*time.Second), "", fieldsPVClaimRef))},
		{name: "an entry without time",
			prev: freePV,
			obj: func() metav1.Object {
				pv := claimedPV(mfEntry("kube-controller-manager", after, "", fieldsPVClaimRef))
				pv.ManagedFields[0].Time = nil
				return pv
			}()},
		{name: "unreadable field set",
			prev: freePV,
			obj:  claimedPV(mfEntry("kube-controller-manager", after, "", `{"f:spec":`))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ForeignBinderWrite(tc.prev, tc.obj, foreignStart)
			if ok != (tc.want != 0) || got.Fields != tc.want || got.Manager != tc.wantManager {
				t.Fatalf("ForeignBinderWrite = %+v (%s), %v; want fields %s of %q", got, got.Fields, ok, tc.want, tc.wantManager)
			}
			if ok && got.Time.Before(foreignStart.Truncate(time.Second)) {
				t.Errorf("time %s before the start", got.Time)
			}
		})
	}
}

func TestBindingFieldsString(t *testing.T) {
	if got, want := (FieldVolumeName | FieldPhase | FieldBindCompleted).String(),
		"spec.volumeName, status.phase, annotation pv.kubernetes.io/bind-completed"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

// TestNoticeForeign runs the transform's glue: a KCM write after the start
// on the leader gives one AnotherBinder event and one count; the same on a
// standby, an own write and a second pass over the slim object give none.
func TestNoticeForeign(t *testing.T) {
	recorder := record.NewFakeRecorder(10)
	reg := prometheus.NewRegistry()
	c, err := New(Options{Client: fake.NewClientset(), Workers: 1, Recorder: recorder, Registerer: reg,
		Clock: func() time.Time { return foreignStart }})
	if err != nil {
		t.Fatal(err)
	}
	prev := foreignPendingClaim()
	prev.ResourceVersion = "10"
	c.claims.Upsert(slimClaim(shared, prev))
	kcmWrite := func(rv string) *v1.PersistentVolumeClaim {
		o := foreignBoundClaim(mfEntry("kube-controller-manager", foreignStart.Add(time.Minute), "", fieldsClaimBind))
		o.ResourceVersion = rv
		return o
	}
	count := func() float64 {
		return testutil.ToFloat64(c.metrics.foreign.WithLabelValues("PersistentVolumeClaim", "kube-controller-manager"))
	}

	if _, err := c.transform(kcmWrite("11")); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 || len(recorder.Events) != 0 {
		t.Fatalf("a standby said it: count %v, %d events", n, len(recorder.Events))
	}
	c.leading.Store(true)
	slim, err := c.transform(kcmWrite("11"))
	if err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Errorf("count = %v, want 1", n)
	}
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, "Warning AnotherBinder kube-controller-manager wrote spec.volumeName") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event")
	}
	if _, err := c.transform(slim); err != nil {
		t.Fatal(err)
	}
	own := foreignBoundClaim(mfEntry("tether-binder", foreignStart.Add(time.Minute), "", fieldsClaimBind))
	own.ResourceVersion = "12"
	if _, err := c.transform(own); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 || len(recorder.Events) != 0 {
		t.Errorf("after a second pass and an own write: count %v, %d more events", n, len(recorder.Events))
	}
}

// The names are in the order of the bits: bindingValues is indexed by it.
func TestBindingFieldNamesOrder(t *testing.T) {
	for i, n := range bindingFieldNames {
		if n.field != 1<<i {
			t.Errorf("bindingFieldNames[%d] is %s, bit %b", i, n.name, n.field)
		}
	}
}
