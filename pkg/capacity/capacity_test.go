package capacity

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
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

func pvIn(class string, terms ...map[string]string) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{StorageClassName: class}}
	if len(terms) == 0 {
		return pv
	}
	sel := &v1.NodeSelector{}
	for _, t := range terms {
		var term v1.NodeSelectorTerm
		for k, v := range t {
			term.MatchExpressions = append(term.MatchExpressions, v1.NodeSelectorRequirement{Key: k, Operator: v1.NodeSelectorOpIn, Values: []string{v}})
		}
		sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, term)
	}
	pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: sel}
	return pv
}

// Which published objects a created or deleted volume touches.
func TestVolumeChangeCovers(t *testing.T) {
	notIn := pvIn("local", map[string]string{"node": "a"})
	notIn.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Operator = v1.NodeSelectorOpNotIn
	twoValues := pvIn("local", map[string]string{"node": "a"})
	twoValues.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"a", "b"}
	byField := pvIn("local", map[string]string{"node": "a"})
	byField.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchFields = []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n"}}}
	segA, segB := map[string]string{"node": "a"}, map[string]string{"node": "b"}
	zoneA := map[string]string{"zone": "z1", "node": "a"}
	tests := []struct {
		name  string
		pv    *v1.PersistentVolume
		entry entry
		want  bool
	}{
		{"same class and segment", pvIn("local", segA), entry{"local", segA}, true},
		{"same class, other segment", pvIn("local", segA), entry{"local", segB}, false},
		{"other class, same segment", pvIn("local", segA), entry{"fast", segA}, false},
		{"no node affinity: every segment of the class", pvIn("local"), entry{"local", segB}, true},
		{"no node affinity, other class", pvIn("local"), entry{"fast", segB}, false},
		{"no class: every class", pvIn("", segA), entry{"fast", segA}, true},
		{"second term matches", pvIn("local", segB, segA), entry{"local", segA}, true},
		{"volume in a zone, segment zone and node", pvIn("local", map[string]string{"zone": "z1"}), entry{"local", zoneA}, true},
		{"volume in another zone", pvIn("local", map[string]string{"zone": "z2"}), entry{"local", zoneA}, false},
		{"NotIn: every segment of the class", notIn, entry{"local", segB}, true},
		{"two values: every segment of the class", twoValues, entry{"local", segB}, true},
		{"match fields: every segment of the class", byField, entry{"local", segB}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := change{class: tt.pv.Spec.StorageClassName, topology: volumeTopology(tt.pv)}
			if got := ch.covers(tt.entry); got != tt.want {
				t.Errorf("covers(%v) = %v, want %v (topology %v)", tt.entry, got, tt.want, ch.topology)
			}
		})
	}
}

// recordingDriver reports each GetCapacity as "class-param/node".
type recordingDriver struct {
	mu    sync.Mutex
	free  map[string]int64
	calls chan string
}

func (d *recordingDriver) DriverName() string { return "local.csi.tether.dev" }
func (d *recordingDriver) GetCapacity(_ context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	node := req.GetAccessibleTopology().GetSegments()["node"]
	d.calls <- req.GetParameters()["class"] + "/" + node
	d.mu.Lock()
	defer d.mu.Unlock()
	return &csi.GetCapacityResponse{AvailableCapacity: d.free[node]}, nil
}

func (d *recordingDriver) set(node string, free int64) {
	d.mu.Lock()
	d.free[node] = free
	d.mu.Unlock()
}

// newPartialPublisher publishes for classes "local" and "fast" (both
// WaitForFirstConsumer, their parameter "class" names them) on nodes a and b.
func newPartialPublisher(t *testing.T, poll time.Duration) (*Publisher, *recordingDriver, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	n := 0
	var mu sync.Mutex
	client.PrependReactor("create", "csistoragecapacities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*storagev1.CSIStorageCapacity)
		mu.Lock()
		n++
		obj.Name = fmt.Sprintf("%s%d", obj.GenerateName, n)
		mu.Unlock()
		return false, nil, nil
	})
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, name := range []string{"local", "fast"} {
		c := class(name, "local.csi.tether.dev", storagev1.VolumeBindingWaitForFirstConsumer)
		c.Parameters = map[string]string{"class": name}
		if err := idx.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	drv := &recordingDriver{free: map[string]int64{"a": 10 << 30, "b": 5 << 30}, calls: make(chan string, 100)}
	p, err := New(Options{Client: client, Driver: drv, Namespace: "ns", ManagedBy: "test",
		Segments: func() ([]map[string]string, error) { return []map[string]string{{"node": "a"}, {"node": "b"}}, nil },
		Classes:  storagelisters.NewStorageClassLister(idx), PollInterval: poll,
		DriverParams: func(m map[string]string) (map[string]string, error) { return m, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return p, drv, client
}

func published(t *testing.T, client *fake.Clientset) map[string]string {
	t.Helper()
	list, err := client.StorageV1().CSIStorageCapacities("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range list.Items {
		out[o.StorageClassName+"/"+o.NodeTopology.MatchLabels["node"]] = o.Capacity.String()
	}
	return out
}

// drain returns the GetCapacity calls made so far, sorted.
func drain(d *recordingDriver) []string {
	var out []string
	for {
		select {
		case c := <-d.calls:
			out = append(out, c)
		default:
			slices.Sort(out)
			return out
		}
	}
}

// A created or deleted volume refreshes its class in its segment alone.
func TestSyncChangedAsksOnlyForTheChange(t *testing.T) {
	p, drv, client := newPartialPublisher(t, time.Minute)
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := drain(drv); len(got) != 4 {
		t.Fatalf("first sync asked %v, want every class in every segment", got)
	}
	drv.set("a", 1<<30)
	drv.set("b", 2<<30)
	if err := p.syncChanged(t.Context(), change{class: "local", topology: volumeTopology(pvIn("local", map[string]string{"node": "a"}))}); err != nil {
		t.Fatal(err)
	}
	if got, want := drain(drv), []string{"local/a"}; !slices.Equal(got, want) {
		t.Errorf("GetCapacity calls %v, want %v", got, want)
	}
	want := map[string]string{"local/a": "1Gi", "local/b": "5Gi", "fast/a": "10Gi", "fast/b": "5Gi"}
	if got := published(t, client); !maps.Equal(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
	// A class change refreshes the class in every segment.
	if err := p.syncChanged(t.Context(), change{class: "fast"}); err != nil {
		t.Fatal(err)
	}
	if got, want := drain(drv), []string{"fast/a", "fast/b"}; !slices.Equal(got, want) {
		t.Errorf("GetCapacity calls %v, want %v", got, want)
	}
	want = map[string]string{"local/a": "1Gi", "local/b": "5Gi", "fast/a": "1Gi", "fast/b": "2Gi"}
	if got := published(t, client); !maps.Equal(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
}

// Run refreshes what VolumeChanged and ClassChanged name, and everything
// on Trigger.
func TestRunRefreshesWhatChanged(t *testing.T) {
	p, drv, _ := newPartialPublisher(t, time.Hour) // no poll during the test
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	next := func(n int) []string {
		t.Helper()
		var got []string
		for range n {
			select {
			case c := <-drv.calls:
				got = append(got, c)
			case <-time.After(30 * time.Second):
				t.Fatalf("only %v of %d GetCapacity calls", got, n)
			}
		}
		slices.Sort(got)
		return got
	}
	if got := next(4); !slices.Equal(got, []string{"fast/a", "fast/b", "local/a", "local/b"}) {
		t.Fatalf("first refresh asked %v", got)
	}
	p.VolumeChanged(pvIn("local", map[string]string{"node": "b"}))
	if got := next(1); !slices.Equal(got, []string{"local/b"}) {
		t.Errorf("after a volume in local/b: %v", got)
	}
	p.ClassChanged("fast")
	if got := next(2); !slices.Equal(got, []string{"fast/a", "fast/b"}) {
		t.Errorf("after class fast changed: %v (an earlier refresh asked for more than its part)", got)
	}
	p.Trigger()
	if got := next(4); !slices.Equal(got, []string{"fast/a", "fast/b", "local/a", "local/b"}) {
		t.Errorf("after Trigger: %v", got)
	}
}

// Too many waiting parts make the next refresh one of everything.
func TestTooManyChangesRefreshEverything(t *testing.T) {
	p, _, _ := newPartialPublisher(t, time.Hour)
	for range maxChanges {
		p.ClassChanged("local")
	}
	if full, changes := p.take(); full || len(changes) != maxChanges {
		t.Fatalf("take() = %v, %d changes; want the %d changes", full, len(changes), maxChanges)
	}
	for range maxChanges + 1 {
		p.ClassChanged("local")
	}
	if full, changes := p.take(); !full || changes != nil {
		t.Errorf("take() = %v, %d changes; want everything", full, len(changes))
	}
}

// The class handler names the class, also from a tombstone.
func TestClassHandler(t *testing.T) {
	p, _, _ := newPartialPublisher(t, time.Hour)
	h := p.ClassHandler()
	h.OnAdd(class("first-list", "x", storagev1.VolumeBindingImmediate), true) // Run's first refresh covers it
	h.OnAdd(class("a", "x", storagev1.VolumeBindingImmediate), false)
	h.OnUpdate(nil, class("b", "x", storagev1.VolumeBindingImmediate))
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "c", Obj: class("c", "x", storagev1.VolumeBindingImmediate)})
	full, changes := p.take()
	var got []string
	for _, ch := range changes {
		got = append(got, ch.class)
	}
	if full || !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("take() = %v, classes %v; want a, b, c", full, got)
	}
	h.OnDelete("not a class")
	if full, _ := p.take(); !full {
		t.Error("an unknown object did not refresh everything")
	}
}
