package intern

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func claim(size string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u", Labels: map[string]string{"app": "db"},
			Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}, Finalizers: []string{"kubernetes.io/pvc-protection"}},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}},
			StorageClassName: ptr.To("fast"), VolumeMode: ptr.To(v1.PersistentVolumeFilesystem), VolumeName: "pv",
		},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}},
	}
}

func volume() *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv", Labels: map[string]string{"zone": "a"},
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "csi.example.com"}},
		Spec: v1.PersistentVolumeSpec{
			Capacity:    v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: "fast",
			MountOptions: []string{"noatime"},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "csi.example.com",
				VolumeHandle: "h", VolumeAttributes: map[string]string{"storage.kubernetes.io/csiProvisionerIdentity": "1-2-csi"}}},
			ClaimRef: &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "c", UID: "u"},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a"}}},
			}}}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeBound},
	}
}

func same(t *testing.T, what string, x, y any) {
	t.Helper()
	if reflect.ValueOf(x).UnsafePointer() != reflect.ValueOf(y).UnsafePointer() {
		t.Errorf("%s not shared", what)
	}
}

// Sharing changes no content, and objects that hold a value alike then
// hold one copy of it.
func TestShare(t *testing.T) {
	in := &Interner{}
	a, b := in.Claim(claim("1Gi")), in.Claim(claim("1Gi"))
	if !equality.Semantic.DeepEqual(a, claim("1Gi")) {
		t.Errorf("Claim changed the claim: %+v", a)
	}
	same(t, "labels", a.Labels, b.Labels)
	same(t, "annotations", a.Annotations, b.Annotations)
	same(t, "finalizers", a.Finalizers, b.Finalizers)
	same(t, "requests", a.Spec.Resources.Requests, b.Spec.Resources.Requests)
	same(t, "status capacity", a.Status.Capacity, b.Status.Capacity)
	same(t, "access modes", a.Spec.AccessModes, b.Spec.AccessModes)
	same(t, "class", a.Spec.StorageClassName, b.Spec.StorageClassName)
	same(t, "volume mode", a.Spec.VolumeMode, b.Spec.VolumeMode)

	p, q := in.Volume(volume()), in.Volume(volume())
	if !equality.Semantic.DeepEqual(p, volume()) {
		t.Errorf("Volume changed the PV: %+v", p)
	}
	same(t, "capacity", p.Spec.Capacity, q.Spec.Capacity)
	same(t, "PV labels", p.Labels, q.Labels)
	same(t, "PV annotations", p.Annotations, q.Annotations)
	same(t, "CSI attributes", p.Spec.CSI.VolumeAttributes, q.Spec.CSI.VolumeAttributes)
	same(t, "mount options", p.Spec.MountOptions, q.Spec.MountOptions)
	same(t, "node affinity", p.Spec.NodeAffinity, q.Spec.NodeAffinity)

	// Different values are not shared.
	c := in.Claim(claim("2Gi"))
	if equality.Semantic.DeepEqual(c.Spec.Resources.Requests, a.Spec.Resources.Requests) {
		t.Error("2Gi shares 1Gi's list")
	}
}

// No two different values share a key.
func TestKeys(t *testing.T) {
	in := &Interner{}
	lists := [][]string{nil, {}, {""}, {"", ""}, {"a"}, {"a", "b"}, {"ab"}, {"a:b"}, {"1:a"}}
	for i, l := range lists {
		for j, m := range lists[:i] {
			if reflect.DeepEqual(in.Strings(l), m) && !reflect.DeepEqual(l, m) {
				t.Errorf("Strings(%q) gave %q (list %d)", l, m, j)
			}
		}
		if got := in.Strings(l); !reflect.DeepEqual(got, l) {
			t.Errorf("Strings(%q) = %q", l, got)
		}
	}
	maps := []map[string]string{nil, {}, {"a": ""}, {"": "a"}, {"a": "b"}, {"a": "b", "c": ""}, {"a": "b\x00c"}}
	for _, m := range maps {
		if got := in.StringMap(m); !reflect.DeepEqual(got, m) {
			t.Errorf("StringMap(%q) = %q", m, got)
		}
	}
	for _, q := range []string{"1Gi", "1073741824", "1G", "2Gi"} {
		l := v1.ResourceList{v1.ResourceStorage: resource.MustParse(q)}
		if got := in.Resources(l); !equality.Semantic.DeepEqual(got, l) || got.Storage().String() != q {
			t.Errorf("Resources(%s) = %v", q, got)
		}
	}
}

// The tables start again once full: values that never repeat cost a
// bounded table.
func TestBounded(t *testing.T) {
	var tab table[string]
	for i := range 3 * Limit {
		tab.get(string(rune(i)), "v")
	}
	if len(tab.m) > Limit {
		t.Errorf("table holds %d values, more than %d", len(tab.m), Limit)
	}
}

// The transform shares claims' and PVs' values and drops every object's
// managed fields, and nothing else; twice is once.
func TestTransform(t *testing.T) {
	in := &Interner{}
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	c := claim("1Gi")
	c.ManagedFields = managed
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: managed}, Spec: v1.NodeSpec{PodCIDR: "10.0.0.0/24"}}
	for _, obj := range []any{c, node, "not an object"} {
		got, err := in.Transform(obj)
		if err != nil || got != obj {
			t.Fatalf("Transform(%T) = %v, %v; want the object itself", obj, got, err)
		}
		if again, _ := in.Transform(got); again != obj {
			t.Fatalf("a second Transform(%T) = %v", obj, again)
		}
	}
	if !equality.Semantic.DeepEqual(c, claim("1Gi")) || c.ManagedFields != nil {
		t.Errorf("claim = %+v, want the same without managed fields", c)
	}
	if node.ManagedFields != nil || node.Spec.PodCIDR != "10.0.0.0/24" {
		t.Errorf("node = %+v", node)
	}
	same(t, "a transformed claim's requests", c.Spec.Resources.Requests, in.Claim(claim("1Gi")).Spec.Resources.Requests)
}
