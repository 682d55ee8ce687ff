package capacity

import (
	"fmt"
	"maps"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func term(kv ...string) v1.TopologySelectorTerm {
	var t v1.TopologySelectorTerm
	for i := 0; i < len(kv); i += 2 {
		t.MatchLabelExpressions = append(t.MatchLabelExpressions, v1.TopologySelectorLabelRequirement{Key: kv[i], Values: []string{kv[i+1]}})
	}
	return t
}

func TestAdmits(t *testing.T) {
	seg := map[string]string{"zone": "a", "rack": "1"}
	twoValues := v1.TopologySelectorTerm{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"b", "a"}}}}
	noValues := v1.TopologySelectorTerm{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: "zone"}}}
	for _, tt := range []struct {
		name  string
		terms []v1.TopologySelectorTerm
		want  bool
	}{
		{"no allowedTopologies", nil, true},
		{"only empty terms", []v1.TopologySelectorTerm{{}}, true},
		{"the segment's value", []v1.TopologySelectorTerm{term("zone", "a")}, true},
		{"another value", []v1.TopologySelectorTerm{term("zone", "b")}, false},
		{"one of the values", []v1.TopologySelectorTerm{twoValues}, true},
		{"no values", []v1.TopologySelectorTerm{noValues}, false},
		{"every expression", []v1.TopologySelectorTerm{term("zone", "a", "rack", "1")}, true},
		{"one expression fails", []v1.TopologySelectorTerm{term("zone", "a", "rack", "2")}, false},
		{"one term of two", []v1.TopologySelectorTerm{term("zone", "b"), term("rack", "1")}, true},
		{"no term of two", []v1.TopologySelectorTerm{term("zone", "b"), term("rack", "2")}, false},
		{"an empty term beside a failing one", []v1.TopologySelectorTerm{{}, term("zone", "b")}, false},
		{"a key the segment lacks", []v1.TopologySelectorTerm{term("topology.kubernetes.io/zone", "x")}, true},
		{"a key it lacks beside one it fails", []v1.TopologySelectorTerm{term("zone", "b", "host", "x")}, false},
		{"a key it lacks beside one it has", []v1.TopologySelectorTerm{term("zone", "a", "host", "x")}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := admits(tt.terms, seg); got != tt.want {
				t.Errorf("admits = %v, want %v", got, tt.want)
			}
		})
	}
}

// A class with allowedTopologies gets objects only in the segments they
// admit; an object left in another (by an earlier publisher) is deleted;
// a class without them is published everywhere.
func TestAllowedTopologiesPublish(t *testing.T) {
	left := &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{Name: "left", Namespace: "ns",
			Labels: map[string]string{LabelDriverName: "local.csi.tether.dev", LabelManagedBy: "test"}},
		NodeTopology: &metav1.LabelSelector{MatchLabels: map[string]string{"node": "b"}}, StorageClassName: "narrow",
	}
	client := fake.NewClientset(left)
	n := 0
	client.PrependReactor("create", "csistoragecapacities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*storagev1.CSIStorageCapacity)
		n++
		obj.Name = fmt.Sprintf("%s%d", obj.GenerateName, n)
		return false, nil, nil
	})
	narrow := class("narrow", "local.csi.tether.dev", storagev1.VolumeBindingWaitForFirstConsumer)
	narrow.AllowedTopologies = []v1.TopologySelectorTerm{term("node", "a"), term("node", "c")}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range []*storagev1.StorageClass{narrow, class("local", "local.csi.tether.dev", storagev1.VolumeBindingWaitForFirstConsumer)} {
		if err := idx.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	segments := []map[string]string{{"node": "a"}, {"node": "b"}, {"node": "c"}}
	p, err := New(Options{Client: client, Driver: &fakeDriver{free: map[string]int64{"a": 1 << 30, "b": 2 << 30, "c": 3 << 30}},
		Namespace: "ns", ManagedBy: "test", Segments: func() ([]map[string]string, error) { return segments, nil },
		Classes: storagelisters.NewStorageClassLister(idx), PollInterval: time.Hour,
		DriverParams: func(m map[string]string) (map[string]string, error) { return m, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"narrow/a": "1Gi", "narrow/c": "3Gi", "local/a": "1Gi", "local/b": "2Gi", "local/c": "3Gi"}
	if got := published(t, client); !maps.Equal(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
}
