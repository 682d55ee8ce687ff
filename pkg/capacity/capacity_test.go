package capacity

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// fakeDriver answers GetCapacity from a table by node segment value.
type fakeDriver struct{ free map[string]int64 }

func (d *fakeDriver) DriverName() string { return "local.csi.tether.dev" }
func (d *fakeDriver) GetCapacity(_ context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	return &csi.GetCapacityResponse{AvailableCapacity: d.free[req.GetAccessibleTopology().GetSegments()["node"]]}, nil
}

func class(name, provisioner string, mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
}

// TestSync: one object per (delayed class of the driver, segment); changed
// capacity updates it; a segment that goes away deletes it; other
// drivers' and Immediate classes get none.
func TestSync(t *testing.T) {
	client := fake.NewClientset()
	// The fake does not fill in generateName; the API server does.
	n := 0
	client.PrependReactor("create", "csistoragecapacities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*storagev1.CSIStorageCapacity)
		n++
		obj.Name = fmt.Sprintf("%s%d", obj.GenerateName, n)
		return false, nil, nil
	})
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range []*storagev1.StorageClass{
		class("local", "local.csi.tether.dev", storagev1.VolumeBindingWaitForFirstConsumer),
		class("now", "local.csi.tether.dev", storagev1.VolumeBindingImmediate),
		class("other", "other.example.com", storagev1.VolumeBindingWaitForFirstConsumer),
	} {
		if err := idx.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	drv := &fakeDriver{free: map[string]int64{"a": 10 << 30, "b": 5 << 30}}
	segments := []map[string]string{{"node": "a"}, {"node": "b"}}
	p, err := New(Options{Client: client, Driver: drv, Namespace: "ns", ManagedBy: "test",
		Segments: func() ([]map[string]string, error) { return segments, nil },
		Classes:  storagelisters.NewStorageClassLister(idx), PollInterval: time.Minute,
		DriverParams: func(m map[string]string) (map[string]string, error) { return m, nil }})
	if err != nil {
		t.Fatal(err)
	}
	capacities := func() map[string]string {
		list, err := client.StorageV1().CSIStorageCapacities("ns").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, o := range list.Items {
			out[o.StorageClassName+"/"+o.NodeTopology.MatchLabels["node"]] = o.Capacity.String()
			if o.Labels[LabelDriverName] != "local.csi.tether.dev" || o.Labels[LabelManagedBy] != "test" {
				t.Errorf("labels %v", o.Labels)
			}
		}
		return out
	}
	check := func(step string, want map[string]string) {
		t.Helper()
		if err := p.Sync(t.Context()); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		got := capacities()
		if len(got) != len(want) {
			t.Fatalf("%s: objects %v, want %v", step, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %s, want %s", step, k, got[k], v)
			}
		}
	}
	check("first sync", map[string]string{"local/a": "10Gi", "local/b": "5Gi"})
	drv.free["a"] = 4 << 30
	check("capacity changed", map[string]string{"local/a": "4Gi", "local/b": "5Gi"})
	segments = segments[:1]
	check("node b gone", map[string]string{"local/a": "4Gi"})
	check("no change", map[string]string{"local/a": "4Gi"})
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New accepted empty options")
	}
}
