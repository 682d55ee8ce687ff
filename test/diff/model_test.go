package diff

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const testNS = "diff-t"

type pvOpt func(*corev1.PersistentVolume)
type claimOpt func(*corev1.PersistentVolumeClaim)

func tpv(name, class, size string, opts ...pvOpt) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: class,
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:      []corev1.PersistentVolumeAccessMode{rwo},
		},
	}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

func tclaim(name string, class *string, size string, opts ...claimOpt) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{rwo},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			},
		},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func pvModesOpt(m ...corev1.PersistentVolumeAccessMode) pvOpt {
	return func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = m }
}
func pvLabels(l map[string]string) pvOpt {
	return func(pv *corev1.PersistentVolume) { pv.Labels = l }
}
func pvBlock(pv *corev1.PersistentVolume) { pv.Spec.VolumeMode = &block }
func prebind(claim string) pvOpt {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: testNS, Name: claim}
	}
}
func wantVolume(name string) claimOpt {
	return func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = name }
}
func selectLabels(l map[string]string) claimOpt {
	return func(c *corev1.PersistentVolumeClaim) { c.Spec.Selector = &metav1.LabelSelector{MatchLabels: l} }
}
func claimModesOpt(m ...corev1.PersistentVolumeAccessMode) claimOpt {
	return func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = m }
}

func class(name string, mode storagev1.VolumeBindingMode, isDefault bool) *storagev1.StorageClass {
	c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: NoProvisioner, VolumeBindingMode: &mode}
	if isDefault {
		c.Annotations = map[string]string{DefaultClassAnnotation: "true"}
	}
	return c
}

func str(s string) *string { return &s }

// outcome is a compact form of a ClaimExpectation for table tests:
// "Bound:pv", "Pending", "Bound:?a,b" (candidates), "?" (undetermined).
func outcome(e ClaimExpectation) string {
	switch {
	case !e.PhaseKnown:
		return "?"
	case e.Phase == corev1.ClaimPending:
		return "Pending"
	case e.VolumeKnown:
		return "Bound:" + e.Volume
	}
	s := "Bound:?"
	for i, c := range e.Candidates {
		if i > 0 {
			s += ","
		}
		s += c
	}
	return s
}

func TestAnalyze(t *testing.T) {
	imm, wffc := storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer
	tests := []struct {
		name    string
		classes []*storagev1.StorageClass
		pvs     []*corev1.PersistentVolume
		claims  []*corev1.PersistentVolumeClaim
		want    []string
		wantPV  []string // phases, "?" when undetermined
	}{{
		name:   "smallest fitting volume",
		pvs:    []*corev1.PersistentVolume{tpv("big", "", "10Gi"), tpv("small", "", "2Gi"), tpv("tiny", "", "1Gi")},
		claims: []*corev1.PersistentVolumeClaim{tclaim("c0", str(""), "2Gi"), tclaim("c1", nil, "5Gi"), tclaim("c2", str(""), "5Gi")},
		want:   []string{"Bound:small", "Bound:big", "Pending"},
		wantPV: []string{"Bound", "Bound", "Available"},
	}, {
		name:   "equal sizes tie, and the next claim takes the other one",
		pvs:    []*corev1.PersistentVolume{tpv("a", "", "1Gi"), tpv("b", "", "1Gi"), tpv("c", "", "5Gi")},
		claims: []*corev1.PersistentVolumeClaim{tclaim("c0", str(""), "1Gi"), tclaim("c1", str(""), "1Gi"), tclaim("c2", str(""), "5Gi")},
		want:   []string{"Bound:?a,b", "Bound:?a,b", "Bound:c"},
		wantPV: []string{"Bound", "Bound", "Bound"},
	}, {
		name: "a tie decides whether a later claim binds",
		pvs: []*corev1.PersistentVolume{
			tpv("a", "", "1Gi", pvLabels(map[string]string{"tier": "gold"})), tpv("b", "", "1Gi"),
		},
		claims: []*corev1.PersistentVolumeClaim{
			tclaim("c0", str(""), "1Gi"), tclaim("c1", str(""), "1Gi", selectLabels(map[string]string{"tier": "gold"})),
		},
		want:   []string{"Bound:?a,b", "?"},
		wantPV: []string{"Bound", "?"},
	}, {
		name: "fewer access modes win over size",
		pvs: []*corev1.PersistentVolume{
			tpv("rwo-rwx", "", "1Gi", pvModesOpt(rwo, rwx)), tpv("rwo", "", "10Gi"),
		},
		claims: []*corev1.PersistentVolumeClaim{tclaim("c0", str(""), "1Gi"), tclaim("c1", str(""), "1Gi")},
		want:   []string{"Bound:rwo", "Bound:rwo-rwx"},
	}, {
		name: "groups with as many modes come in no fixed order",
		pvs: []*corev1.PersistentVolume{
			tpv("rwo-rox", "", "5Gi", pvModesOpt(rox, rwo)), tpv("rwo-rwx", "", "1Gi", pvModesOpt(rwo, rwx)),
		},
		claims: []*corev1.PersistentVolumeClaim{tclaim("c0", str(""), "1Gi")},
		want:   []string{"Bound:?rwo-rox,rwo-rwx"},
	}, {
		name: "class, selector, volume mode and access modes filter",
		pvs: []*corev1.PersistentVolume{
			tpv("gold", "fast", "1Gi", pvLabels(map[string]string{"tier": "gold"})),
			tpv("plain", "fast", "1Gi"),
			tpv("blk", "fast", "1Gi", pvBlock),
			tpv("rox", "fast", "1Gi", pvModesOpt(rox)),
		},
		claims: []*corev1.PersistentVolumeClaim{
			tclaim("c0", str("fast"), "1Gi", selectLabels(map[string]string{"tier": "gold"})),
			tclaim("c1", str("slow"), "1Gi"),
			tclaim("c2", str("fast"), "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = &block }),
			tclaim("c3", str("fast"), "1Gi", claimModesOpt(rox)),
			tclaim("c4", str("fast"), "1Gi", claimModesOpt(rwx)),
		},
		want: []string{"Bound:gold", "Pending", "Bound:blk", "Bound:rox", "Pending"},
	}, {
		name:    "nil class takes the default class",
		classes: []*storagev1.StorageClass{class("std", imm, true)},
		pvs:     []*corev1.PersistentVolume{tpv("none", "", "1Gi"), tpv("std", "std", "1Gi")},
		claims:  []*corev1.PersistentVolumeClaim{tclaim("c0", nil, "1Gi"), tclaim("c1", nil, "1Gi")},
		want:    []string{"Bound:std", "Pending"},
	}, {
		name:   "pre-bound volume wins in its group, whatever its class and labels",
		pvs:    []*corev1.PersistentVolume{tpv("small", "", "1Gi"), tpv("mine", "other", "10Gi", prebind("c0"))},
		claims: []*corev1.PersistentVolumeClaim{tclaim("c0", str(""), "1Gi", selectLabels(map[string]string{"x": "y"})), tclaim("c1", str(""), "1Gi")},
		want:   []string{"Bound:mine", "Bound:small"},
	}, {
		name: "a fitting volume with fewer modes beats the pre-bound one",
		pvs: []*corev1.PersistentVolume{
			tpv("small", "", "1Gi"), tpv("mine", "", "1Gi", prebind("c0"), pvModesOpt(rwo, rox)),
		},
		claims: []*corev1.PersistentVolumeClaim{tclaim("c0", str(""), "1Gi")},
		want:   []string{"Bound:small"},
		wantPV: []string{"Bound", "Available"},
	}, {
		name:   "volumes pre-bound to others are never matched",
		pvs:    []*corev1.PersistentVolume{tpv("theirs", "", "1Gi", prebind("c9"))},
		claims: []*corev1.PersistentVolumeClaim{tclaim("c0", str(""), "1Gi"), tclaim("c1", str(""), "1Gi", wantVolume("theirs"))},
		want:   []string{"Pending", "Pending"},
		wantPV: []string{"Available"},
	}, {
		name:    "waiting for a consumer binds only pre-bound volumes",
		classes: []*storagev1.StorageClass{class("late", wffc, false)},
		pvs:     []*corev1.PersistentVolume{tpv("free", "late", "1Gi"), tpv("mine", "late", "1Gi", prebind("c1"))},
		claims:  []*corev1.PersistentVolumeClaim{tclaim("c0", str("late"), "1Gi"), tclaim("c1", str("late"), "1Gi")},
		want:    []string{"Pending", "Bound:mine"},
	}, {
		name: "requested volume: fits, does not fit, missing, taken, pre-bound to the claim",
		pvs: []*corev1.PersistentVolume{
			tpv("ok", "", "1Gi", pvLabels(map[string]string{"a": "b"})),
			tpv("small", "", "1Gi"),
			tpv("odd", "other", "1Gi", prebind("c4"), pvModesOpt(rox)),
		},
		claims: []*corev1.PersistentVolumeClaim{
			// The selector is not checked for a requested volume.
			tclaim("c0", str(""), "1Gi", wantVolume("ok"), selectLabels(map[string]string{"x": "y"})),
			tclaim("c1", str(""), "5Gi", wantVolume("small")),
			tclaim("c2", str(""), "1Gi", wantVolume("nope")),
			tclaim("c3", str(""), "1Gi", wantVolume("ok")),
			tclaim("c4", str(""), "5Gi", wantVolume("odd")),
		},
		want:   []string{"Bound:ok", "Pending", "Pending", "Pending", "Bound:odd"},
		wantPV: []string{"Bound", "Available", "Bound"},
	}, {
		name:   "a requested volume that a tie may have taken is undetermined",
		pvs:    []*corev1.PersistentVolume{tpv("a", "", "1Gi"), tpv("b", "", "1Gi")},
		claims: []*corev1.PersistentVolumeClaim{tclaim("c0", str(""), "1Gi"), tclaim("c1", str(""), "1Gi", wantVolume("a"))},
		want:   []string{"Bound:?a,b", "?"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Scenario{Seed: 1, Namespace: testNS, Classes: tt.classes, PVs: tt.pvs, Claims: tt.claims}
			a := Analyze(s)
			var got []string
			for _, e := range a.Claims {
				got = append(got, outcome(e))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("claims = %q, want %q", got, tt.want)
				for _, e := range a.Claims {
					t.Logf("  %s: %s", e.Name, e.Why)
				}
			}
			if tt.wantPV == nil {
				return
			}
			var gotPV []string
			for _, e := range a.PVs {
				if e.PhaseKnown {
					gotPV = append(gotPV, string(e.Phase))
				} else {
					gotPV = append(gotPV, "?")
				}
			}
			if !reflect.DeepEqual(gotPV, tt.wantPV) {
				t.Errorf("volumes = %q, want %q", gotPV, tt.wantPV)
			}
		})
	}
}

func TestAnalyzeIsPure(t *testing.T) {
	s := Generate(7)
	before := Describe(s)
	a, b := Analyze(s), Analyze(s)
	if !reflect.DeepEqual(a, b) {
		t.Error("two analyses of one scenario differ")
	}
	if Describe(s) != before {
		t.Error("Analyze changed the scenario")
	}
}
