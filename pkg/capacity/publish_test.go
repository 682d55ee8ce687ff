package capacity

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func TestNeedsList(t *testing.T) {
	tests := []struct {
		name   string
		listed bool
		fulls  int
		full   bool
		want   bool
	}{
		{"never listed", false, 0, true, true},
		{"never listed, a partial refresh", false, 0, false, true},
		{"listed, next full refresh", true, 1, true, false},
		{"listed, the last full refresh before a list", true, relistEvery - 1, true, false},
		{"listed, the full refresh that lists", true, relistEvery, true, true},
		{"a partial refresh never lists for the count", true, relistEvery + 5, false, false},
		{"after a failed write", false, 3, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := needsList(tt.listed, tt.fulls, tt.full); got != tt.want {
				t.Errorf("needsList(%v, %d, %v) = %v, want %v", tt.listed, tt.fulls, tt.full, got, tt.want)
			}
		})
	}
}

func capObj(name, class, node string, created int, free int64) storagev1.CSIStorageCapacity {
	return storagev1.CSIStorageCapacity{
		ObjectMeta:       metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))},
		StorageClassName: class, NodeTopology: &metav1.LabelSelector{MatchLabels: map[string]string{"node": node}},
		Capacity: resource.NewQuantity(free, resource.BinarySI),
	}
}

// index keeps one object per (class, segment), the oldest.
func TestIndex(t *testing.T) {
	tests := []struct {
		name     string
		items    []storagev1.CSIStorageCapacity
		kept     []string // names, sorted
		dropped  []string
		wantKeys int
	}{
		{"none", nil, nil, nil, 0},
		{"one per key", []storagev1.CSIStorageCapacity{capObj("x", "local", "a", 1, 1), capObj("y", "local", "b", 1, 1), capObj("z", "fast", "a", 1, 1)},
			[]string{"x", "y", "z"}, nil, 3},
		{"a duplicate: the older stays", []storagev1.CSIStorageCapacity{capObj("new", "local", "a", 5, 1), capObj("old", "local", "a", 2, 1)},
			[]string{"old"}, []string{"new"}, 1},
		{"same age: the first name stays", []storagev1.CSIStorageCapacity{capObj("b", "local", "a", 1, 1), capObj("a", "local", "a", 1, 1), capObj("c", "local", "a", 1, 1)},
			[]string{"a"}, []string{"b", "c"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objects, dups := index(tt.items)
			var kept, dropped []string
			for _, o := range objects {
				kept = append(kept, o.Name)
			}
			for _, o := range dups {
				dropped = append(dropped, o.Name)
			}
			slices.Sort(kept)
			slices.Sort(dropped)
			if len(objects) != tt.wantKeys || !slices.Equal(kept, tt.kept) || !slices.Equal(dropped, tt.dropped) {
				t.Errorf("kept %v, dropped %v; want %v, %v", kept, dropped, tt.kept, tt.dropped)
			}
		})
	}
}

func TestObsolete(t *testing.T) {
	la, lb, fa := capObj("la", "local", "a", 1, 1), capObj("lb", "local", "b", 1, 1), capObj("fa", "fast", "a", 1, 1)
	objects := map[string]*storagev1.CSIStorageCapacity{}
	for _, o := range []*storagev1.CSIStorageCapacity{&la, &lb, &fa} {
		objects[entryOf(o).key()] = o
	}
	keyOf := func(o storagev1.CSIStorageCapacity) string { return entryOf(&o).key() }
	all := func(entry) bool { return true }
	onlyLocal := func(e entry) bool { return e.class == "local" }
	tests := []struct {
		name string
		keys []string
		in   func(entry) bool
		want []string
	}{
		{"every pair still wanted", []string{keyOf(la), keyOf(lb), keyOf(fa)}, all, nil},
		{"segment b gone", []string{keyOf(la), keyOf(fa)}, all, []string{"lb"}},
		{"class fast gone", []string{keyOf(la), keyOf(lb)}, all, []string{"fa"}},
		{"nothing wanted", nil, all, []string{"fa", "la", "lb"}},
		{"a partial refresh leaves the others alone", nil, onlyLocal, []string{"la", "lb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := map[string]bool{}
			for _, k := range tt.keys {
				keys[k] = true
			}
			var got []string
			for k, o := range obsolete(objects, keys, tt.in) {
				if k != entryOf(o).key() {
					t.Errorf("%s under key %q", o.Name, k)
				}
				got = append(got, o.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("obsolete = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	owner := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "prov", UID: types.UID("ours")}
	theirs := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "ep", UID: types.UID("theirs")}
	gi := func(n int64) *resource.Quantity { return resource.NewQuantity(n<<30, resource.BinarySI) }
	w := want{entry: entry{class: "local", segment: map[string]string{"node": "a"}}, capacity: gi(4), maxSize: gi(2)}
	cur := func(free, maxSize *resource.Quantity, owners ...metav1.OwnerReference) *storagev1.CSIStorageCapacity {
		o := capObj("csisc-1", "local", "a", 1, 0)
		o.Capacity, o.MaximumVolumeSize, o.OwnerReferences = free, maxSize, owners
		return &o
	}
	tests := []struct {
		name       string
		owner      *metav1.OwnerReference
		cur        *storagev1.CSIStorageCapacity
		write      bool
		wantOwners []types.UID
	}{
		{"none yet: created", nil, nil, true, nil},
		{"none yet: created with the owner", owner, nil, true, []types.UID{"ours"}},
		{"the same: nothing", nil, cur(gi(4), gi(2)), false, nil},
		{"the same, ours: nothing", owner, cur(gi(4), gi(2), *owner), false, nil},
		{"capacity changed", nil, cur(gi(5), gi(2)), true, nil},
		{"maximum size changed", nil, cur(gi(4), gi(3)), true, nil},
		{"maximum size appeared", nil, cur(gi(4), nil), true, nil},
		{"the same, another's: ours added", owner, cur(gi(4), gi(2), theirs), true, []types.UID{"theirs", "ours"}},
		{"another's, no owner of ours: nothing", nil, cur(gi(4), gi(2), theirs), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Publisher{o: Options{Owner: tt.owner, Namespace: "ns", ManagedBy: "test", Driver: &fakeDriver{}}}
			before := tt.cur.DeepCopy()
			gotCur, obj := p.plan(tt.cur, w)
			if gotCur != tt.cur {
				t.Errorf("plan returned another current object")
			}
			if (obj != nil) != tt.write {
				t.Fatalf("write %v, want %v", obj != nil, tt.write)
			}
			if tt.cur != nil && !equalObj(tt.cur, before) {
				t.Error("plan changed the recorded object")
			}
			if obj == nil {
				return
			}
			if !sameQuantity(obj.Capacity, w.capacity) || !sameQuantity(obj.MaximumVolumeSize, w.maxSize) {
				t.Errorf("sizes %v, %v; want %v, %v", obj.Capacity, obj.MaximumVolumeSize, w.capacity, w.maxSize)
			}
			var owners []types.UID
			for _, o := range obj.OwnerReferences {
				owners = append(owners, o.UID)
			}
			if !slices.Equal(owners, tt.wantOwners) {
				t.Errorf("owners %v, want %v", owners, tt.wantOwners)
			}
			if tt.cur == nil {
				if obj.GenerateName != "csisc-" || obj.StorageClassName != "local" || obj.NodeTopology.MatchLabels["node"] != "a" ||
					!maps.Equal(obj.Labels, map[string]string{LabelDriverName: "local.csi.tether.dev", LabelManagedBy: "test"}) {
					t.Errorf("new object %+v", obj)
				}
			} else if obj.Name != tt.cur.Name {
				t.Errorf("update of %s names %s", tt.cur.Name, obj.Name)
			}
		})
	}
}

func equalObj(a, b *storagev1.CSIStorageCapacity) bool {
	return a.Name == b.Name && sameQuantity(a.Capacity, b.Capacity) && sameQuantity(a.MaximumVolumeSize, b.MaximumVolumeSize) &&
		len(a.OwnerReferences) == len(b.OwnerReferences)
}

// requests counts the API requests made to CSIStorageCapacity by verb.
func requests(client interface {
	Actions() []k8stesting.Action
}) map[string]int {
	out := map[string]int{}
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "csistoragecapacities" {
			out[a.GetVerb()]++
		}
	}
	return out
}

// A refresh in which nothing changed makes no API request; a change, one
// update; every relistEvery-th refresh of everything, and the one after a
// failed write, lists again, and so puts right an object deleted behind
// the publisher's back.
func TestSyncRequests(t *testing.T) {
	p, drv, client := newPartialPublisher(t, time.Hour)
	ctx := t.Context()
	step := func(name string, want map[string]int) {
		t.Helper()
		client.ClearActions()
		if err := p.Sync(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		drain(drv)
		if got := requests(client); !maps.Equal(got, want) {
			t.Errorf("%s: requests %v, want %v", name, got, want)
		}
	}
	step("first", map[string]int{"list": 1, "create": 4})
	step("nothing changed", map[string]int{})
	drv.set("a", 1<<30)
	step("node a changed", map[string]int{"update": 2})
	// Someone deletes an object: it is back at the next list.
	list, err := client.StorageV1().CSIStorageCapacities("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.StorageV1().CSIStorageCapacities("ns").Delete(ctx, list.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < relistEvery; i++ {
		step(fmt.Sprintf("refresh %d", i+1), map[string]int{})
	}
	step("the refresh that lists", map[string]int{"list": 1, "create": 1})
	if got := published(t, client); len(got) != 4 {
		t.Errorf("published %v after the list", got)
	}
	// An update that fails (the object changed behind its back) makes the
	// next refresh list.
	client.PrependReactor("update", "csistoragecapacities", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "storage.k8s.io", Resource: "csistoragecapacities"}, "x", errors.New("changed"))
	})
	drv.set("b", 1<<30)
	client.ClearActions()
	if err := p.Sync(ctx); err == nil {
		t.Error("a failed update was not reported")
	}
	drain(drv)
	client.ReactionChain = client.ReactionChain[1:]
	step("after the failed updates", map[string]int{"list": 1, "update": 2})
}

// failingDriver fails GetCapacity in the segments named.
type failingDriver struct {
	fakeDriver
	mu    sync.Mutex
	fail  map[string]bool
	calls int
}

func (d *failingDriver) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	d.mu.Lock()
	d.calls++
	fail := d.fail[req.GetAccessibleTopology().GetSegments()["node"]]
	d.mu.Unlock()
	if fail {
		return nil, errors.New("no answer")
	}
	return d.fakeDriver.GetCapacity(ctx, req)
}

// A segment whose call fails keeps its object and does not hold up the
// others; a driver that answers nothing ends the refresh after maxFailing
// calls.
func TestSyncFailingCalls(t *testing.T) {
	nodes := []string{"a", "b", "c", "d", "e"}
	var segments []map[string]string
	free := map[string]int64{}
	for _, n := range nodes {
		segments = append(segments, map[string]string{"node": n})
		free[n] = 5 << 30
	}
	drv := &failingDriver{fakeDriver: fakeDriver{free: free}, fail: map[string]bool{}}
	p, client := newPublisher(t, drv, func() ([]map[string]string, error) { return segments, nil })
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		fail      []string
		wantCalls int
		want      map[string]string
	}{
		{"one segment fails", []string{"b"}, 5,
			map[string]string{"local/a": "1Gi", "local/b": "5Gi", "local/c": "1Gi", "local/d": "1Gi", "local/e": "1Gi"}},
		{"two in a row fail", []string{"c", "d"}, 5,
			map[string]string{"local/a": "1Gi", "local/b": "1Gi", "local/c": "5Gi", "local/d": "5Gi", "local/e": "1Gi"}},
		{"the driver answers nothing", nodes, maxFailing,
			map[string]string{"local/a": "5Gi", "local/b": "5Gi", "local/c": "5Gi", "local/d": "5Gi", "local/e": "5Gi"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range nodes {
				drv.free[n] = 5 << 30
			}
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes {
				drv.free[n] = 1 << 30
			}
			drv.mu.Lock()
			drv.calls, drv.fail = 0, map[string]bool{}
			for _, n := range tt.fail {
				drv.fail[n] = true
			}
			drv.mu.Unlock()
			if err := p.Sync(t.Context()); err == nil {
				t.Error("failed calls were not reported")
			}
			drv.mu.Lock()
			calls := drv.calls
			drv.fail = map[string]bool{}
			drv.mu.Unlock()
			if calls != tt.wantCalls {
				t.Errorf("%d GetCapacity calls, want %d", calls, tt.wantCalls)
			}
			if got := published(t, client); !maps.Equal(got, tt.want) {
				t.Errorf("published %v, want %v", got, tt.want)
			}
		})
	}
}

// newPublisher publishes for one WaitForFirstConsumer class, "local", in
// the segments given.
func newPublisher(t *testing.T, drv Driver, segments func() ([]map[string]string, error)) (*Publisher, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	var mu sync.Mutex
	n := 0
	client.PrependReactor("create", "csistoragecapacities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*storagev1.CSIStorageCapacity)
		mu.Lock()
		n++
		obj.Name = fmt.Sprintf("%s%d", obj.GenerateName, n)
		mu.Unlock()
		return false, nil, nil
	})
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(class("local", "local.csi.tether.dev", storagev1.VolumeBindingWaitForFirstConsumer)); err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Client: client, Driver: drv, Namespace: "ns", ManagedBy: "test", Segments: segments,
		Classes: storagelisters.NewStorageClassLister(idx), PollInterval: time.Hour,
		DriverParams: func(m map[string]string) (map[string]string, error) { return m, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return p, client
}

// hookDriver runs before(node) ahead of each answer.
type hookDriver struct {
	fakeDriver
	before func(node string)
}

func (d *hookDriver) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	d.before(req.GetAccessibleTopology().GetSegments()["node"])
	return d.fakeDriver.GetCapacity(ctx, req)
}

// A changed object is written as soon as the driver told the change, not
// after the round of calls: the last segment's call waits here until the
// first segment's update has reached the API.
func TestWritesDoNotWaitForTheRound(t *testing.T) {
	segments := []map[string]string{{"node": "first"}, {"node": "middle"}, {"node": "last"}}
	updated := make(chan struct{})
	var once sync.Once
	waiting := false
	drv := &hookDriver{fakeDriver: fakeDriver{free: map[string]int64{"first": 5 << 30, "middle": 5 << 30, "last": 5 << 30}}}
	drv.before = func(node string) {
		if node != "last" || !waiting {
			return
		}
		select {
		case <-updated:
		case <-time.After(30 * time.Second):
			t.Error("the first segment's update was not written while the round went on")
		}
	}
	p, client := newPublisher(t, drv, func() ([]map[string]string, error) { return segments, nil })
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	client.PrependReactor("update", "csistoragecapacities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.UpdateAction).GetObject().(*storagev1.CSIStorageCapacity)
		if obj.NodeTopology.MatchLabels["node"] == "first" {
			once.Do(func() { close(updated) })
		}
		return false, nil, nil
	})
	drv.free["first"], waiting = 1<<30, true
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := published(t, client); got["local/first"] != "1Gi" {
		t.Errorf("published %v", got)
	}
}
