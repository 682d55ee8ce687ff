package capacity

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// The provisioner starts before kubelet registers its driver (the normal
// DaemonSet order): the node's CSINode has no entry for the driver, so
// there is nothing to publish. Once kubelet adds the entry, the objects
// appear at once, not at the next poll (an hour here).
func TestCSINodeRegistrationPublishesAtOnce(t *testing.T) {
	const driver, node = "local.csi.tether.dev", "n1"
	client := fake.NewClientset(
		class("local", driver, storagev1.VolumeBindingWaitForFirstConsumer),
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"node": node}}},
		&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node}},
	)
	n := 0
	client.PrependReactor("create", "csistoragecapacities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*storagev1.CSIStorageCapacity)
		n++ // only Run's goroutine creates
		obj.Name = fmt.Sprintf("%s%d", obj.GenerateName, n)
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	csiNodes := factory.Storage().V1().CSINodes()
	classes := factory.Storage().V1().StorageClasses()
	asked := make(chan struct{}, 100) // one per refresh, once it has read the CSINode
	segments := func() ([]map[string]string, error) {
		defer func() { asked <- struct{}{} }()
		cn, err := csiNodes.Lister().Get(node)
		if err != nil {
			return nil, err
		}
		for _, d := range cn.Spec.Drivers {
			if d.Name == driver && len(d.TopologyKeys) > 0 {
				return []map[string]string{{"node": node}}, nil
			}
		}
		return nil, nil
	}
	p, err := New(Options{Client: client, Driver: &fakeDriver{free: map[string]int64{node: 3 << 30}}, Namespace: "ns", ManagedBy: "test",
		Segments: segments, Classes: classes.Lister(), PollInterval: time.Hour,
		DriverParams: func(m map[string]string) (map[string]string, error) { return m, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := csiNodes.Informer().AddEventHandler(p.CSINodeHandler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), csiNodes.Informer().HasSynced, classes.Informer().HasSynced) {
		t.Fatal("informers did not sync")
	}
	go func() { defer close(done); p.Run(ctx) }()

	// Run's first refresh publishes nothing: the driver is not registered.
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("no first refresh")
	}
	if got := published(t, client); len(got) != 0 {
		t.Fatalf("published %v before the driver was registered", got)
	}
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
		{Name: driver, NodeID: node, TopologyKeys: []string{"node"}}}}}
	if _, err := client.StorageV1().CSINodes().Update(ctx, cn, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = published(t, client)
		return got["local/"+node] == "3Gi" && len(got) == 1, nil
	})
	if err != nil {
		t.Fatalf("30 s after the driver's registration, published %v; want local/%s 3Gi", got, node)
	}
}

// Only changes of the driver's own entry refresh: another driver's
// registration, or a CSINode update that leaves the entry alone, does not.
func TestCSINodeHandlerFilters(t *testing.T) {
	p, _, _ := newPartialPublisher(t, time.Hour)
	h := p.CSINodeHandler()
	ours := storagev1.CSINodeDriver{Name: "local.csi.tether.dev", NodeID: "a", TopologyKeys: []string{"node"}}
	other := storagev1.CSINodeDriver{Name: "other.example.com", NodeID: "a"}
	with := func(ds ...storagev1.CSINodeDriver) *storagev1.CSINode {
		return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: storagev1.CSINodeSpec{Drivers: ds}}
	}
	moved := ours
	moved.TopologyKeys = []string{"zone"}
	for _, tt := range []struct {
		name string
		do   func()
		full bool
	}{
		{"add without the driver", func() { h.OnAdd(with(other), false) }, false},
		{"add with the driver", func() { h.OnAdd(with(ours), false) }, true},
		{"add of the first list: Run's first refresh covers it", func() { h.OnAdd(with(ours), true) }, false},
		{"registration", func() { h.OnUpdate(with(other), with(other, ours)) }, true},
		{"unrelated update", func() { h.OnUpdate(with(ours), with(ours, other)) }, false},
		{"topology keys changed", func() { h.OnUpdate(with(ours), with(moved)) }, true},
		{"deregistration", func() { h.OnUpdate(with(ours), with()) }, true},
		{"delete, tombstone", func() { h.OnDelete(cache.DeletedFinalStateUnknown{Obj: with(ours)}) }, true},
		{"delete without the driver", func() { h.OnDelete(with(other)) }, false},
	} {
		tt.do()
		if full, _ := p.take(); full != tt.full {
			t.Errorf("%s: full refresh %v, want %v", tt.name, full, tt.full)
		}
	}
}
