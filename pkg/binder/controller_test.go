package binder

import (
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	storagelisters "k8s.io/client-go/listers/storage/v1"
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
