package libv8

import (
	"slices"
	"sync"
	"testing"

	"github.com/tether-csi/tether/pkg/inflight"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestQuietClaims: the library's claim handler must not see the updates
// that only add or remove the in-flight record, or each attempt's own
// writes start the next attempt at once, past the rate limiter (the
// bad-input tour found a final CreateVolume error retried every ~20ms).
func TestQuietClaims(t *testing.T) {
	base := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "data", UID: "uid-1",
		ResourceVersion: "10", Finalizers: []string{"kubernetes.io/pvc-protection"}}}
	with := func(change func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
		c := base.DeepCopy()
		c.ResourceVersion = "11"
		change(c)
		return c
	}
	addInFlight := func(c *v1.PersistentVolumeClaim) { c.Finalizers = append(c.Finalizers, inflight.Finalizer) }
	inFlight := with(addInFlight)
	tests := []struct {
		name     string
		old, new any
		passed   bool
	}{
		{name: "record added", old: base, new: inFlight},
		{name: "record removed", old: inFlight, new: with(func(*v1.PersistentVolumeClaim) {})},
		{name: "record added to a claim without finalizers",
			old: &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x", ResourceVersion: "1"}},
			new: &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x", ResourceVersion: "2", Finalizers: []string{inflight.Finalizer}}}},
		{name: "record added with managed fields", old: base, new: with(func(c *v1.PersistentVolumeClaim) {
			addInFlight(c)
			c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "tether-provisioner"}}
		})},
		{name: "resync", old: base, new: base, passed: true},
		{name: "record added with an annotation", old: base, new: with(func(c *v1.PersistentVolumeClaim) {
			addInFlight(c)
			c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-1"}
		}), passed: true},
		{name: "record removed as the claim is deleted", old: inFlight, new: with(func(c *v1.PersistentVolumeClaim) {
			c.DeletionTimestamp = &metav1.Time{}
		}), passed: true},
		{name: "another finalizer", old: base, new: with(func(c *v1.PersistentVolumeClaim) {
			c.Finalizers = append(c.Finalizers, "example.com/other")
		}), passed: true},
		{name: "spec change", old: inFlight, new: with(func(c *v1.PersistentVolumeClaim) {
			addInFlight(c)
			c.Spec.VolumeName = "pv-1"
		}), passed: true},
		{name: "record removed by the bind write", old: inFlight, new: with(func(c *v1.PersistentVolumeClaim) {
			c.Spec.VolumeName = "pv-1"
		}), passed: true},
		{name: "record added as the phase changes", old: base, new: with(func(c *v1.PersistentVolumeClaim) {
			addInFlight(c)
			c.Status.Phase = v1.ClaimLost
		}), passed: true},
		{name: "a tombstone", old: base, new: cache.DeletedFinalStateUnknown{Key: "apps/data", Obj: inFlight}, passed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var updates, adds, deletes int
			h := quietHandler{cache.ResourceEventHandlerFuncs{
				AddFunc:    func(any) { adds++ },
				UpdateFunc: func(any, any) { updates++ },
				DeleteFunc: func(any) { deletes++ },
			}}
			h.OnUpdate(tt.old, tt.new)
			h.OnAdd(tt.new, false)
			h.OnDelete(tt.old)
			if (updates == 1) != tt.passed || adds != 1 || deletes != 1 {
				t.Errorf("updates %d (want passed=%v), adds %d, deletes %d", updates, tt.passed, adds, deletes)
			}
		})
	}
}

// TestClaimsRequeue: Requeue hands the stored claim to the library's
// handlers as an update without change (passed through the quiet
// handler); a key the store does not hold is left alone.
func TestClaimsRequeue(t *testing.T) {
	claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "data", UID: "uid-1", ResourceVersion: "7"}}
	f := informers.NewSharedInformerFactory(fake.NewClientset(claim), 0)
	claims := QuietClaims(f.Core().V1().PersistentVolumeClaims().Informer())
	var mu sync.Mutex
	var updated []string
	if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
		o, n := oldObj.(*v1.PersistentVolumeClaim), newObj.(*v1.PersistentVolumeClaim)
		mu.Lock()
		defer mu.Unlock()
		updated = append(updated, o.ResourceVersion+"/"+n.Namespace+"/"+n.Name)
	}}); err != nil {
		t.Fatal(err)
	}
	f.Start(t.Context().Done())
	f.WaitForCacheSync(t.Context().Done())
	claims.Requeue("apps/data")
	claims.Requeue("apps/none")
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"7/apps/data"}; !slices.Equal(updated, want) {
		t.Errorf("updates %q, want %q", updated, want)
	}
}
