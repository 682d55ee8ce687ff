package binder

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

func pendingClaim(name, class string, created time.Time, change ...func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(created)},
		Spec:       v1.PersistentVolumeClaimSpec{StorageClassName: &class},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending},
	}
	for _, f := range change {
		f(c)
	}
	return c
}

func bindingClass(name string, mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, VolumeBindingMode: &mode}
}

func TestAwaitsVolume(t *testing.T) {
	immediate := bindingClass("fast", storagev1.VolumeBindingImmediate)
	wffc := bindingClass("local", storagev1.VolumeBindingWaitForFirstConsumer)
	now := time.Now()
	selected := func(c *v1.PersistentVolumeClaim) {
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnSelectedNode, "n1")
	}
	for _, tc := range []struct {
		name  string
		claim *v1.PersistentVolumeClaim
		class *storagev1.StorageClass
		want  bool
	}{
		{"pending, immediate", pendingClaim("a", "fast", now), immediate, true},
		{"no phase yet", pendingClaim("a", "fast", now, func(c *v1.PersistentVolumeClaim) { c.Status.Phase = "" }), immediate, true},
		{"bound", pendingClaim("a", "fast", now, func(c *v1.PersistentVolumeClaim) { c.Status.Phase = v1.ClaimBound }), immediate, false},
		{"lost", pendingClaim("a", "fast", now, func(c *v1.PersistentVolumeClaim) { c.Status.Phase = v1.ClaimLost }), immediate, false},
		{"being deleted", pendingClaim("a", "fast", now, func(c *v1.PersistentVolumeClaim) { c.DeletionTimestamp = &metav1.Time{Time: now} }), immediate, false},
		{"first consumer not there", pendingClaim("a", "local", now), wffc, false},
		{"first consumer chose a node", pendingClaim("a", "local", now, selected), wffc, true},
		{"first consumer class, pre-bound", pendingClaim("a", "local", now, func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv" }), wffc, true},
		{"class unknown", pendingClaim("a", "gone", now), nil, true},
	} {
		if got := awaitsVolume(tc.claim, tc.class); got != tc.want {
			t.Errorf("%s: awaitsVolume = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPendingMetrics(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range []*storagev1.StorageClass{bindingClass("fast", storagev1.VolumeBindingImmediate), bindingClass("local", storagev1.VolumeBindingWaitForFirstConsumer)} {
		if err := classes.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	claims := NewStore[*v1.PersistentVolumeClaim]()
	for _, c := range []*v1.PersistentVolumeClaim{
		pendingClaim("old", "fast", now.Add(-time.Hour)),
		pendingClaim("new", "fast", now.Add(-time.Minute)),
		pendingClaim("waits", "local", now.Add(-48*time.Hour)),
		pendingClaim("bound", "fast", now.Add(-72*time.Hour), func(c *v1.PersistentVolumeClaim) { c.Status.Phase = v1.ClaimBound }),
		pendingClaim("none", "", now.Add(-2*time.Minute)),
	} {
		claims.Upsert(c)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&pendingCollector{claims: claims, classes: storagelisters.NewStorageClassLister(classes), now: func() time.Time { return now }})
	want := `
# HELP tether_binder_oldest_pending_claim_age_seconds Age (since its creation) of the oldest claim counted in tether_binder_pending_claims, by StorageClass.
# TYPE tether_binder_oldest_pending_claim_age_seconds gauge
tether_binder_oldest_pending_claim_age_seconds{storage_class=""} 120
tether_binder_oldest_pending_claim_age_seconds{storage_class="fast"} 3600
# HELP tether_binder_pending_claims Claims Pending that wait for a volume: not being deleted, and not a WaitForFirstConsumer claim without a selected node; by StorageClass.
# TYPE tether_binder_pending_claims gauge
tether_binder_pending_claims{storage_class=""} 1
tether_binder_pending_claims{storage_class="fast"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
