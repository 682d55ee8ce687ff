package binder

import (
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// newTestController is a Controller on a fake client whose informers are
// never started: the tests feed its caches and call its syncs directly.
func newTestController(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	c, err := New(Options{Client: client, Workers: 1, Recorder: record.NewFakeRecorder(100)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.claimQueue.ShutDown()
		c.volumeQueue.ShutDown()
	})
	return c, client
}

// hookedClasses runs a function when the claim sync lists the classes,
// that is in the middle of the sync.
type hookedClasses struct {
	storagelisters.StorageClassLister
	onList func()
}

func (h hookedClasses) List(sel labels.Selector) ([]*storagev1.StorageClass, error) {
	if h.onList != nil {
		h.onList()
	}
	return h.StorageClassLister.List(sel)
}

// A claim deleted while its sync runs leaves no key among the pending
// claims; one that stays is pending.
func TestPendingClaimDeletedMidSync(t *testing.T) {
	for _, tt := range []struct {
		name        string
		deleted     bool
		wantPending []string
	}{
		{"claim stays", false, []string{"default/c"}},
		{"claim deleted mid-sync", true, []string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			claim := newPVC("c", "1Gi")
			c, _ := newTestController(t, claim)
			c.claims.Upsert(claim)
			h := hookedClasses{StorageClassLister: c.classLister}
			if tt.deleted {
				h.onList = func() { c.claimHandler().OnDelete(claim) }
			}
			c.classLister = h
			_ = c.syncClaim(t.Context(), "default/c") // the write may fail on a deleted claim
			if got := c.pending.all(); !equality.Semantic.DeepEqual(got, tt.wantPending) {
				t.Errorf("pending claims %v, want %v", got, tt.wantPending)
			}
		})
	}
}

// claimOf asks the API server once about a claimRef whose claim is gone or
// was replaced by one of another UID, not on every resync; it asks again
// for a new volume of the same name or a new claimRef UID.
func TestClaimOfAsksOnce(t *testing.T) {
	reused := newPVC("c", "1Gi", claimUID("uid-new"))
	for _, tt := range []struct {
		name      string
		api       []runtime.Object // claims in the API server
		cached    *v1.PersistentVolumeClaim
		pv        *v1.PersistentVolume
		wantClaim string // UID of the returned claim, "" for nil
		wantGets  int32  // API reads after three calls
	}{
		{name: "released volume, name reused by a newer claim",
			api: []runtime.Object{reused}, cached: reused,
			pv:       newPV("pv", "1Gi", pvClaimRef("c", "uid-old"), pvPhase(v1.VolumeReleased)),
			wantGets: 1},
		{name: "bound volume, claim gone from the API and the cache",
			pv:       newPV("pv", "1Gi", pvClaimRef("c", "uid-old"), pvPhase(v1.VolumeBound)),
			wantGets: 1},
		{name: "bound volume, name reused in the API and the cache",
			api: []runtime.Object{reused}, cached: reused,
			pv:       newPV("pv", "1Gi", pvClaimRef("c", "uid-old"), pvPhase(v1.VolumeBound)),
			wantGets: 1},
		{name: "bound volume, stale cache holds another UID, the API the right one",
			api:       []runtime.Object{newPVC("c", "1Gi", claimUID("uid-old"), claimRV("9"))},
			cached:    newPVC("c", "1Gi", claimUID("uid-new"), claimRV("5")),
			pv:        newPV("pv", "1Gi", pvClaimRef("c", "uid-old"), pvPhase(v1.VolumeBound)),
			wantClaim: "uid-old", wantGets: 1},
		{name: "released volume, claim gone from the cache: no read at all",
			pv:       newPV("pv", "1Gi", pvClaimRef("c", "uid-old"), pvPhase(v1.VolumeReleased)),
			wantGets: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, client := newTestController(t, tt.api...)
			gets := countClaimGets(client)
			if tt.cached != nil {
				c.claims.Upsert(tt.cached)
			}
			for range 3 {
				got, err := c.claimOf(t.Context(), tt.pv)
				if err != nil {
					t.Fatal(err)
				}
				if uid := uidOf(got); uid != tt.wantClaim {
					t.Fatalf("claimOf = claim %q, want %q", uid, tt.wantClaim)
				}
			}
			if got := gets.Load(); got != tt.wantGets {
				t.Errorf("%d claim reads from the API, want %d", got, tt.wantGets)
			}
		})
	}
}

func TestClaimOfAsksAgain(t *testing.T) {
	reused := newPVC("c", "1Gi", claimUID("uid-new"))
	c, client := newTestController(t, reused)
	gets := countClaimGets(client)
	c.claims.Upsert(reused)
	pv := newPV("pv", "1Gi", pvClaimRef("c", "uid-old"), pvPhase(v1.VolumeReleased))
	call := func() {
		t.Helper()
		if _, err := c.claimOf(t.Context(), pv); err != nil {
			t.Fatal(err)
		}
	}
	call()
	call()
	if got := gets.Load(); got != 1 {
		t.Fatalf("%d reads, want 1", got)
	}
	// The volume is deleted and made again under its name.
	c.volumeHandler().OnDelete(pv)
	call()
	if got := gets.Load(); got != 2 {
		t.Errorf("after the volume was deleted: %d reads, want 2", got)
	}
	// The claimRef now names another claim.
	pv = newPV("pv", "1Gi", pvClaimRef("c", "uid-other"), pvPhase(v1.VolumeReleased))
	call()
	if got := gets.Load(); got != 3 {
		t.Errorf("after the claimRef changed: %d reads, want 3", got)
	}
	if len(c.gone.byVol) != 1 {
		t.Errorf("%d volumes remembered, want 1", len(c.gone.byVol))
	}
}

// A bound volume whose claim the binder saw deleted is released without
// asking the API server about the claim: its deletion event was the API
// server's word. One whose claim it did not see go is asked about once.
func TestClaimOfTrustsTheDeletionEvent(t *testing.T) {
	for _, tt := range []struct {
		name     string
		deleted  *v1.PersistentVolumeClaim // the claim whose deletion event came
		wantGets int32
	}{
		{"the volume's claim deleted", newPVC("c", "1Gi", claimUID("uid-old"), claimVolume("pv")), 0},
		{"another claim of the name deleted (another UID)", newPVC("c", "1Gi", claimUID("uid-other"), claimVolume("pv")), 1},
		{"no deletion seen", nil, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, client := newTestController(t)
			gets := countClaimGets(client)
			pv := newPV("pv", "1Gi", pvClaimRef("c", "uid-old"), pvPhase(v1.VolumeBound))
			c.volumes.Upsert(pv)
			if tt.deleted != nil {
				c.claims.Upsert(tt.deleted)
				c.claimHandler().OnDelete(tt.deleted)
			}
			got, err := c.claimOf(t.Context(), pv)
			if err != nil {
				t.Fatal(err)
			}
			if got != nil {
				t.Errorf("claimOf = claim %q, want none", got.UID)
			}
			if n := gets.Load(); n != tt.wantGets {
				t.Errorf("%d claim reads from the API, want %d", n, tt.wantGets)
			}
		})
	}
}

func countClaimGets(client *fake.Clientset) *atomic.Int32 {
	var n atomic.Int32
	client.PrependReactor("get", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		n.Add(1)
		return false, nil, nil
	})
	return &n
}

func uidOf(c *v1.PersistentVolumeClaim) string {
	if c == nil {
		return ""
	}
	return string(c.UID)
}

func claimRV(rv string) pvcOpt {
	return func(c *v1.PersistentVolumeClaim) { c.ResourceVersion = rv }
}

// The informers keep of a node only what the binder reads, and of other
// objects all but the managed fields; claims and PVs are slimmed
// (slim_test.go).
func TestTransform(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid", ResourceVersion: "7",
			Labels: map[string]string{"host": "n1"}, Annotations: map[string]string{"big": "yes"}, ManagedFields: managed},
		Spec:   v1.NodeSpec{PodCIDR: "10.0.0.0/24"},
		Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"a"}}}},
	}
	class := newClass("fast", "csi.example.com")
	class.ManagedFields = managed
	wantClass := class.DeepCopy()
	wantClass.ManagedFields = nil
	for _, tt := range []struct {
		name string
		in   any
		want any
	}{
		{"node", node, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid", ResourceVersion: "7",
			Labels: map[string]string{"host": "n1"}}}},
		{"class", class, wantClass},
		{"not an object", "x", "x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := transform(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("transform = %+v, want %+v", got, tt.want)
			}
		})
	}
	if _, err := transform(node); err != nil || node.Status.Images == nil {
		t.Error("transform changed the node it was given")
	}
}
