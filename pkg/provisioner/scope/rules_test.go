package scope

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/inflight"
)

const (
	driver = "local.csi.tether.dev"
	other  = "other.csi.example.com"
	annSP  = "volume.kubernetes.io/storage-provisioner"
	annSel = "volume.kubernetes.io/selected-node"
)

func claim(ann map[string]string, finalizers []string, volume string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u1", Annotations: ann, Finalizers: finalizers},
		Spec:       v1.PersistentVolumeClaimSpec{VolumeName: volume},
	}
}

func TestClaim(t *testing.T) {
	central := Scope{Driver: driver}
	node := Scope{Driver: driver, Node: "n1"}
	migrated := Scope{Driver: driver, Migrated: "kubernetes.io/aws-ebs"}
	tests := []struct {
		name string
		s    Scope
		c    *v1.PersistentVolumeClaim
		want bool
	}{
		{"handed to the driver, unbound", central, claim(map[string]string{annSP: driver}, nil, ""), true},
		{"the beta key", central, claim(map[string]string{"volume.beta.kubernetes.io/storage-provisioner": driver}, nil, ""), true},
		{"the migrated plugin", migrated, claim(map[string]string{annSP: "kubernetes.io/aws-ebs"}, nil, ""), true},
		{"handed to another driver", central, claim(map[string]string{annSP: other}, nil, ""), false},
		{"handed to nobody yet", central, claim(nil, nil, ""), false},
		{"bound, ours, nothing of tether's on it", central, claim(map[string]string{annSP: driver}, []string{"kubernetes.io/pvc-protection"}, "pv-1"), false},
		{"bound with a record", central, claim(map[string]string{inflight.AnnVolume: "pvc-u1"}, nil, "pv-1"), true},
		{"the record's finalizer alone", central, claim(nil, []string{inflight.Finalizer}, ""), true},
		{"any record key alone (a later format)", central, claim(map[string]string{"provisioner.tether.dev/in-flight-something": "x"}, nil, "pv-1"), true},
		{"the clone source protection on a bound claim of another driver", central, claim(map[string]string{annSP: other}, []string{"provisioner.storage.kubernetes.io/cloning-protection"}, "pv-1"), true},
		{"anyone's finalizer", central, claim(nil, []string{"example.com/mine"}, "pv-1"), true},
		{"node: selected here", node, claim(map[string]string{annSP: driver, annSel: "n1"}, nil, ""), true},
		{"node: selected elsewhere", node, claim(map[string]string{annSP: driver, annSel: "n2"}, nil, ""), false},
		{"node: not selected yet (immediate binding)", node, claim(map[string]string{annSP: driver}, nil, ""), true},
		{"node: a record of another node", node, claim(map[string]string{annSP: driver, annSel: "n2", inflight.AnnNode: "n2"}, []string{inflight.Finalizer}, ""), true},
		{"centralised: selected anywhere", central, claim(map[string]string{annSP: driver, annSel: "n2"}, nil, ""), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Claim(tt.c); got != tt.want {
				t.Errorf("Claim = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestKeepClaim(t *testing.T) {
	now := metav1.Now()
	deleting := claim(nil, nil, "pv-1")
	deleting.DeletionTimestamp = &now
	for _, tt := range []struct {
		name string
		c    *v1.PersistentVolumeClaim
		want bool
	}{
		{"unbound", claim(nil, nil, ""), true},
		{"bound", claim(nil, nil, "pv-1"), false},
		{"bound and being deleted", deleting, true},
	} {
		if got := KeepClaim(tt.c); got != tt.want {
			t.Errorf("%s: KeepClaim = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func pv(csiDriver string, ann map[string]string, terms ...v1.NodeSelectorTerm) *v1.PersistentVolume {
	p := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1", UID: "p1", Annotations: ann}}
	if csiDriver != "" {
		p.Spec.CSI = &v1.CSIPersistentVolumeSource{Driver: csiDriver, VolumeHandle: "h1"}
	} else {
		p.Spec.HostPath = &v1.HostPathVolumeSource{Path: "/x"}
	}
	if len(terms) > 0 {
		p.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: terms}}
	}
	return p
}

func term(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func TestVolume(t *testing.T) {
	labels := map[string]string{"topology.local/node": "n1", "zone": "a"}
	known := func() (map[string]string, bool) { return labels, true }
	unknown := func() (map[string]string, bool) { return nil, false }
	central := Scope{Driver: driver}
	node := Scope{Driver: driver, Node: "n1", NodeLabels: known}
	byName := v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n2"}}}}
	tests := []struct {
		name string
		s    Scope
		pv   *v1.PersistentVolume
		want bool
	}{
		{"a CSI PV of the driver", central, pv(driver, nil), true},
		{"another driver's", central, pv(other, nil), false},
		{"provisioned by the driver", central, pv(other, map[string]string{"pv.kubernetes.io/provisioned-by": driver}), true},
		{"in-tree, no migration", central, pv("", nil), false},
		{"in-tree, the driver migrates a plugin", Scope{Driver: driver, Migrated: "kubernetes.io/aws-ebs"}, pv("", nil), true},
		{"node: on this node", node, pv(driver, nil, term("topology.local/node", v1.NodeSelectorOpIn, "n1")), true},
		{"node: on another node", node, pv(driver, nil, term("topology.local/node", v1.NodeSelectorOpIn, "n2")), false},
		{"node: either term", node, pv(driver, nil, term("topology.local/node", v1.NodeSelectorOpIn, "n2"), term("zone", v1.NodeSelectorOpIn, "a")), true},
		{"node: a label this node lacks counts as met", node, pv(driver, nil, term("rack", v1.NodeSelectorOpIn, "r9")), true},
		{"node: NotIn this node", node, pv(driver, nil, term("zone", v1.NodeSelectorOpNotIn, "a")), false},
		{"node: by name, another node", node, pv(driver, nil, byName), false},
		{"node: no affinity", node, pv(driver, nil), true},
		{"node: labels not known yet", Scope{Driver: driver, Node: "n1", NodeLabels: unknown}, pv(driver, nil, term("topology.local/node", v1.NodeSelectorOpIn, "n2")), true},
		{"node: another driver's on this node", node, pv(other, nil, term("topology.local/node", v1.NodeSelectorOpIn, "n1")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Volume(tt.pv); got != tt.want {
				t.Errorf("Volume = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNarrowedLabels(t *testing.T) {
	for _, tt := range []struct {
		name          string
		before, after map[string]string
		want          []string
	}{
		{"the same", map[string]string{"a": "1"}, map[string]string{"a": "1"}, nil},
		{"a label added", map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "2"}, nil},
		{"none before", nil, map[string]string{"a": "1"}, nil},
		{"a label removed", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}, []string{"b"}},
		{"a value changed", map[string]string{"a": "1"}, map[string]string{"a": "2"}, []string{"a"}},
		{"all gone", map[string]string{"b": "1", "a": "1"}, nil, []string{"a", "b"}},
		{"changed, removed and added, sorted", map[string]string{"c": "1", "b": "1", "a": "1"}, map[string]string{"a": "1", "b": "2", "d": "1"}, []string{"b", "c"}},
	} {
		if got := NarrowedKeys(tt.before, tt.after); !slices.Equal(got, tt.want) {
			t.Errorf("%s: NarrowedKeys = %v, want %v", tt.name, got, tt.want)
		}
		if got, want := NarrowedLabels(tt.before, tt.after), tt.want != nil; got != want {
			t.Errorf("%s: NarrowedLabels = %v, want %v", tt.name, got, want)
		}
	}
}

func TestSettled(t *testing.T) {
	s := Scope{Driver: driver}
	now := metav1.Now()
	bound := func(policy v1.PersistentVolumeReclaimPolicy, provisionedBy string, finalizers ...string) *v1.PersistentVolume {
		p := pv(driver, map[string]string{"pv.kubernetes.io/provisioned-by": provisionedBy})
		p.Spec.PersistentVolumeReclaimPolicy, p.Finalizers, p.Status.Phase = policy, finalizers, v1.VolumeBound
		return p
	}
	static := func(policy v1.PersistentVolumeReclaimPolicy, finalizers ...string) *v1.PersistentVolume {
		p := pv(driver, nil)
		p.Spec.PersistentVolumeReclaimPolicy, p.Finalizers, p.Status.Phase = policy, finalizers, v1.VolumeBound
		return p
	}
	deleting := bound(v1.PersistentVolumeReclaimDelete, driver, libraryFinalizer)
	deleting.DeletionTimestamp = &now
	released := bound(v1.PersistentVolumeReclaimDelete, driver, libraryFinalizer)
	released.Status.Phase = v1.VolumeReleased
	for _, tt := range []struct {
		name string
		pv   *v1.PersistentVolume
		want bool
	}{
		{"bound, Delete, with the library's finalizer", bound(v1.PersistentVolumeReclaimDelete, driver, libraryFinalizer), true},
		{"bound, Delete, the finalizer still to add", bound(v1.PersistentVolumeReclaimDelete, driver), false},
		{"bound, Retain, the finalizer still to remove", bound(v1.PersistentVolumeReclaimRetain, driver, libraryFinalizer), false},
		{"bound, Retain, no finalizer", bound(v1.PersistentVolumeReclaimRetain, driver), true},
		{"bound, Delete, an empty provisioned-by (neither the library nor the static reclaimer adds it)", bound(v1.PersistentVolumeReclaimDelete, ""), true},
		{"bound, Delete, a static CSI PV of the driver, the finalizer still to add", static(v1.PersistentVolumeReclaimDelete), false},
		{"bound, Delete, a static CSI PV of the driver with the finalizer", static(v1.PersistentVolumeReclaimDelete, libraryFinalizer), true},
		{"bound, Retain, a static CSI PV of the driver", static(v1.PersistentVolumeReclaimRetain), true},
		{"bound, Retain, a static CSI PV of the driver, the finalizer still to remove", static(v1.PersistentVolumeReclaimRetain, libraryFinalizer), false},
		{"bound, Delete, another provisioner's annotation", bound(v1.PersistentVolumeReclaimDelete, other), true},
		{"released", released, false},
		{"being deleted", deleting, false},
	} {
		if got := s.Settled(tt.pv); got != tt.want {
			t.Errorf("%s: Settled = %v, want %v", tt.name, got, tt.want)
		}
		if got := s.Volume(tt.pv); got == tt.want {
			t.Errorf("%s: Volume = %v, want %v (a PV of the driver is kept unless settled)", tt.name, got, !tt.want)
		}
	}
}

// TestMayBeOn reads each operator of a required node affinity against a
// node named n1 with a rack and a numeric label: a label the node lacks
// counts as met, so does what cannot be read (a number that is not one, a
// Gt or Lt without exactly one value).
func TestMayBeOn(t *testing.T) {
	labels := map[string]string{"rack": "r1", "size": "5"}
	field := func(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
		return v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	noTerms := pv(driver, nil)
	noTerms.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{}}
	noRequired := pv(driver, nil)
	noRequired.Spec.NodeAffinity = &v1.VolumeNodeAffinity{}
	for _, tt := range []struct {
		name string
		pv   *v1.PersistentVolume
		want bool
	}{
		{"no affinity", pv(driver, nil), true},
		{"no required affinity", noRequired, true},
		{"no terms", noTerms, true},
		{"In, met", pv(driver, nil, term("rack", v1.NodeSelectorOpIn, "r1")), true},
		{"In, not met", pv(driver, nil, term("rack", v1.NodeSelectorOpIn, "r2")), false},
		{"NotIn, met", pv(driver, nil, term("rack", v1.NodeSelectorOpNotIn, "r2")), true},
		{"NotIn, not met", pv(driver, nil, term("rack", v1.NodeSelectorOpNotIn, "r1")), false},
		{"Exists", pv(driver, nil, term("rack", v1.NodeSelectorOpExists)), true},
		{"DoesNotExist, the node has it", pv(driver, nil, term("rack", v1.NodeSelectorOpDoesNotExist)), false},
		{"DoesNotExist, the node lacks it", pv(driver, nil, term("row", v1.NodeSelectorOpDoesNotExist)), true},
		{"a label the node lacks", pv(driver, nil, term("row", v1.NodeSelectorOpIn, "x")), true},
		{"Gt, above", pv(driver, nil, term("size", v1.NodeSelectorOpGt, "4")), true},
		{"Gt, equal", pv(driver, nil, term("size", v1.NodeSelectorOpGt, "5")), false},
		{"Gt, below", pv(driver, nil, term("size", v1.NodeSelectorOpGt, "6")), false},
		{"Lt, below", pv(driver, nil, term("size", v1.NodeSelectorOpLt, "6")), true},
		{"Lt, equal", pv(driver, nil, term("size", v1.NodeSelectorOpLt, "5")), false},
		{"Lt, above", pv(driver, nil, term("size", v1.NodeSelectorOpLt, "4")), false},
		{"Gt, two values: unreadable", pv(driver, nil, term("size", v1.NodeSelectorOpGt, "6", "7")), true},
		{"Gt, no value: unreadable", pv(driver, nil, term("size", v1.NodeSelectorOpGt)), true},
		{"Gt, not a number: unreadable", pv(driver, nil, term("size", v1.NodeSelectorOpGt, "six")), true},
		{"Lt on a label that is not a number: unreadable", pv(driver, nil, term("rack", v1.NodeSelectorOpLt, "3")), true},
		{"an unknown operator", pv(driver, nil, term("rack", "Near", "r2")), true},
		{"the name, met", pv(driver, nil, field("metadata.name", v1.NodeSelectorOpIn, "n1")), true},
		{"the name, not met", pv(driver, nil, field("metadata.name", v1.NodeSelectorOpIn, "n2")), false},
		{"another field counts as met", pv(driver, nil, field("metadata.uid", v1.NodeSelectorOpIn, "u2")), true},
		{"every expression of a term", pv(driver, nil, v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{
			{Key: "rack", Operator: v1.NodeSelectorOpIn, Values: []string{"r1"}},
			{Key: "size", Operator: v1.NodeSelectorOpGt, Values: []string{"9"}}}}), false},
		{"any term", pv(driver, nil, term("rack", v1.NodeSelectorOpIn, "r2"), term("size", v1.NodeSelectorOpLt, "9")), true},
	} {
		if got := MayBeOn(tt.pv, "n1", labels); got != tt.want {
			t.Errorf("%s: MayBeOn = %v, want %v", tt.name, got, tt.want)
		}
	}
}
