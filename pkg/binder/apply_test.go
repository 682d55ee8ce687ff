package binder

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/tether-csi/tether/pkg/inflight"
)

// The bind write drops the provisioner's in-flight record when the claim
// is bound to the PV the record names, and only then.
func TestBindSettlesInFlightRecord(t *testing.T) {
	tests := []struct {
		name       string
		pvName     string
		driver     string
		format     string // the record's format annotation, "" for none
		wantRecord bool
	}{
		{"the PV the record names", "pvc-uid-1", "csi.tether.dev", "", false},
		{"the PV the record names, format 1 named", "pvc-uid-1", "csi.tether.dev", "1", false},
		// docs/upgrade.md: a record of a format this binder does not read
		// is left for a provisioner that reads it; the claim is bound.
		{"the PV the record names, a newer release's format", "pvc-uid-1", "csi.tether.dev", "2", true},
		{"the PV the record names, a format that is no number", "pvc-uid-1", "csi.tether.dev", "two", true},
		// Defect 3 of issue 12: any provisioned PV bound to the claim's UID
		// dropped the record, while the claim's own CreateVolume was still
		// running; its volume was then tracked by nothing.
		{"another provisioned PV pre-bound to the claim", "pvc-recycled", "csi.tether.dev", "", true},
		{"a PV of the name from another driver", "pvc-uid-1", "other.csi", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := &v1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid-1", Finalizers: []string{"kubernetes.io/pvc-protection"}},
				Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}},
			}
			pv := &v1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: tt.pvName, Annotations: map[string]string{storagehelpers.AnnDynamicallyProvisioned: tt.driver}},
				Spec: v1.PersistentVolumeSpec{AccessModes: claim.Spec.AccessModes, Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
					ClaimRef:               &v1.ObjectReference{Namespace: "ns", Name: "c", UID: "uid-1"},
					PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: tt.driver, VolumeHandle: "h"}}},
			}
			inflight.Record(claim, "csi.tether.dev", "pvc-uid-1")
			if tt.format != "" {
				claim.Annotations[inflight.AnnFormat] = tt.format
			}
			client := fake.NewClientset(claim, pv)
			claims, volumes := NewStore[*v1.PersistentVolumeClaim](), NewIndex()
			recorder := record.NewFakeRecorder(10)
			metrics := NewMetrics(prometheus.NewRegistry(), volumes, claims)
			w := &Writer{Client: client, Recorder: recorder, Volumes: volumes, Claims: claims, Metrics: metrics}
			if err := w.ApplyClaim(t.Context(), claim, ClaimDecision{Op: ClaimBind, Volume: pv}); err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().PersistentVolumeClaims("ns").Get(t.Context(), "c", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.VolumeName != pv.Name || got.Status.Phase != v1.ClaimBound {
				t.Errorf("claim not bound: volumeName %q, phase %q", got.Spec.VolumeName, got.Status.Phase)
			}
			if inflight.Holds(got) != tt.wantRecord {
				t.Errorf("in-flight record on the claim: %v, want %v (finalizers %v)", inflight.Holds(got), tt.wantRecord, got.Finalizers)
			}
			if len(got.Finalizers) == 0 || got.Finalizers[0] != "kubernetes.io/pvc-protection" {
				t.Errorf("other finalizers lost: %v", got.Finalizers)
			}
			_, read := inflight.Format(claim)
			if got.Annotations[inflight.AnnFormat] != claim.Annotations[inflight.AnnFormat] && !read {
				t.Errorf("the unread record's format changed: %q", got.Annotations[inflight.AnnFormat])
			}
			wantUnread := 0.0
			if !read {
				wantUnread = 1
				if len(recorder.Events) != 1 || !strings.Contains(<-recorder.Events, "InFlightRecordUnread") {
					t.Error("no InFlightRecordUnread event")
				}
			}
			if got := testutil.ToFloat64(metrics.unread); got != wantUnread {
				t.Errorf("tether_binder_inflight_records_unread_total %v, want %v", got, wantUnread)
			}
		})
	}
}

// As KCM's updateClaimStatus: the claim's currentVolumeAttributesClassName
// takes the volume's attributes class when the claim goes from Pending to
// Bound, and only then; a claim that loses its volume loses it.
func TestClaimStatusVolumeAttributesClass(t *testing.T) {
	gold, silver := "gold", "silver"
	tests := []struct {
		name      string
		op        ClaimOp
		phase     v1.PersistentVolumeClaimPhase // the claim's phase before
		current   *string                       // the claim's current class before
		pvVAC     *string
		wantPhase v1.PersistentVolumeClaimPhase
		want      *string
	}{
		{name: "Pending to Bound takes the volume's class", op: ClaimBind, phase: v1.ClaimPending, pvVAC: &gold,
			wantPhase: v1.ClaimBound, want: &gold},
		{name: "Pending to Bound, a volume without class", op: ClaimBind, phase: v1.ClaimPending,
			wantPhase: v1.ClaimBound},
		{name: "Pending to Bound, a volume without class clears a stale one", op: ClaimBind, phase: v1.ClaimPending, current: &silver,
			wantPhase: v1.ClaimBound},
		// After binding the field is the resizer's (ModifyVolume in progress).
		{name: "already Bound keeps its class", op: ClaimBind, phase: v1.ClaimBound, current: &silver, pvVAC: &gold,
			wantPhase: v1.ClaimBound, want: &silver},
		// KCM sets it only from Pending: a claim with no phase yet is left alone.
		{name: "no phase to Bound leaves it", op: ClaimBind, phase: "", pvVAC: &gold, wantPhase: v1.ClaimBound},
		{name: "Lost clears it", op: ClaimLost, phase: v1.ClaimBound, current: &gold, pvVAC: &gold, wantPhase: v1.ClaimLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := &v1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid-1"},
				Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					VolumeAttributesClassName: tt.pvVAC,
					Resources:                 v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}},
				Status: v1.PersistentVolumeClaimStatus{Phase: tt.phase, CurrentVolumeAttributesClassName: tt.current},
			}
			pv := &v1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
				Spec: v1.PersistentVolumeSpec{AccessModes: claim.Spec.AccessModes, Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
					VolumeAttributesClassName: tt.pvVAC,
					ClaimRef:                  &v1.ObjectReference{Namespace: "ns", Name: "c", UID: "uid-1"},
					PersistentVolumeSource:    v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "csi.tether.dev", VolumeHandle: "h"}}},
			}
			if tt.phase == v1.ClaimBound {
				claim.Spec.VolumeName = pv.Name
				metav1.SetMetaDataAnnotation(&claim.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
				pv.Status.Phase = v1.VolumeBound
			}
			client := fake.NewClientset(claim, pv)
			claims, volumes := NewStore[*v1.PersistentVolumeClaim](), NewIndex()
			w := &Writer{Client: client, Recorder: record.NewFakeRecorder(10), Volumes: volumes, Claims: claims,
				Metrics: NewMetrics(prometheus.NewRegistry(), volumes, claims)}
			if err := w.ApplyClaim(t.Context(), claim, ClaimDecision{Op: tt.op, Volume: pv}); err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().PersistentVolumeClaims("ns").Get(t.Context(), "c", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != tt.wantPhase {
				t.Errorf("phase %q, want %q", got.Status.Phase, tt.wantPhase)
			}
			if g := got.Status.CurrentVolumeAttributesClassName; !ptr.Equal(g, tt.want) {
				t.Errorf("currentVolumeAttributesClassName %v, want %v", ptr.Deref(g, "<nil>"), ptr.Deref(tt.want, "<nil>"))
			}
		})
	}
}

// As KCM's updateClaimStatus: a volume carrying the pre-resize capacity
// gives the claim that size as its storage when they are bound.
func TestCapacityOnBind(t *testing.T) {
	gi := func(s string) resource.Quantity { return resource.MustParse(s) }
	tests := []struct {
		name    string
		current v1.ResourceList
		pv      *v1.PersistentVolume
		want    v1.ResourceList
	}{
		{name: "no annotation: the volume's capacity",
			pv: newPV("pv", "2Gi"), want: v1.ResourceList{v1.ResourceStorage: gi("2Gi")}},
		{name: "no annotation replaces what the claim had",
			current: v1.ResourceList{v1.ResourceStorage: gi("1Gi"), "example.com/iops": gi("10")},
			pv:      newPV("pv", "2Gi"), want: v1.ResourceList{v1.ResourceStorage: gi("2Gi")}},
		{name: "pre-resize capacity: the claim's storage is the size before the resize",
			pv:   newPV("pv", "2Gi", pvAnn(AnnPreResizeCapacity, "1Gi")),
			want: v1.ResourceList{v1.ResourceStorage: gi("1Gi")}},
		{name: "pre-resize capacity keeps the claim's other entries",
			current: v1.ResourceList{v1.ResourceStorage: gi("5Gi"), "example.com/iops": gi("10")},
			pv:      newPV("pv", "2Gi", pvAnn(AnnPreResizeCapacity, "1Gi")),
			want:    v1.ResourceList{v1.ResourceStorage: gi("1Gi"), "example.com/iops": gi("10")}},
		{name: "unparsable pre-resize capacity: the volume's storage",
			pv:   newPV("pv", "2Gi", pvAnn(AnnPreResizeCapacity, "a lot")),
			want: v1.ResourceList{v1.ResourceStorage: gi("2Gi")}},
		{name: "empty pre-resize capacity: the volume's storage",
			pv:   newPV("pv", "2Gi", pvAnn(AnnPreResizeCapacity, "")),
			want: v1.ResourceList{v1.ResourceStorage: gi("2Gi")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.current.DeepCopy()
			got := CapacityOnBind(tt.current, tt.pv)
			if !equalResources(got, tt.want) {
				t.Errorf("CapacityOnBind = %v, want %v", got, tt.want)
			}
			if !equalResources(tt.current, before) {
				t.Errorf("the claim's capacity was changed in place: %v, was %v", tt.current, before)
			}
		})
	}
}

// Defect 8 of issue 24: the bind wrote the volume's capacity into the
// claim's status even when the volume carries the pre-resize capacity, so
// the resizer took the filesystem for grown. The write sets it when the
// claim becomes Bound, and leaves a Bound claim's capacity alone.
func TestBindHonoursPreResizeCapacity(t *testing.T) {
	tests := []struct {
		name  string
		claim *v1.PersistentVolumeClaim
		pv    *v1.PersistentVolume
		want  string
	}{
		{name: "Pending to Bound, pre-resize capacity", claim: newPVC("c", "1Gi"),
			pv: newPV("pv", "2Gi", pvAnn(AnnPreResizeCapacity, "1Gi")), want: "1Gi"},
		{name: "Pending to Bound, no annotation", claim: newPVC("c", "1Gi"),
			pv: newPV("pv", "2Gi"), want: "2Gi"},
		{name: "Pending to Bound, unparsable annotation", claim: newPVC("c", "1Gi"),
			pv: newPV("pv", "2Gi", pvAnn(AnnPreResizeCapacity, "x")), want: "2Gi"},
		// After the bind a difference is the resizer's business.
		{name: "already Bound keeps its capacity",
			claim: newPVC("c", "1Gi", claimBound("pv"), func(c *v1.PersistentVolumeClaim) {
				c.Status.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("3Gi")}
			}),
			pv:   newPV("pv", "2Gi", pvAnn(AnnPreResizeCapacity, "1Gi"), pvClaimRef("c", "uid-c"), pvPhase(v1.VolumeBound)),
			want: "3Gi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.claim, tt.pv)
			claims, volumes := NewStore[*v1.PersistentVolumeClaim](), NewIndex()
			w := &Writer{Client: client, Recorder: record.NewFakeRecorder(10), Volumes: volumes, Claims: claims,
				Metrics: NewMetrics(prometheus.NewRegistry(), volumes, claims)}
			if err := w.ApplyClaim(t.Context(), tt.claim, ClaimDecision{Op: ClaimBind, Volume: tt.pv}); err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), "c", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != v1.ClaimBound || got.Spec.VolumeName != "pv" {
				t.Fatalf("claim not bound: phase %q, volumeName %q", got.Status.Phase, got.Spec.VolumeName)
			}
			if q := got.Status.Capacity[v1.ResourceStorage]; q.Cmp(resource.MustParse(tt.want)) != 0 {
				t.Errorf("status capacity %s, want %s", q.String(), tt.want)
			}
		})
	}
}
