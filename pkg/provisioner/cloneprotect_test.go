package provisioner

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/tether-csi/tether/pkg/inflight"
)

// protectedSource is apps/src, bound, carrying the clone finalizer.
func protectedSource(opts ...claimOpt) *v1.PersistentVolumeClaim {
	src, _ := sourcePair()
	src.Finalizers = []string{"kubernetes.io/pvc-protection", FinalizerCloneSource}
	for _, o := range opts {
		o(src)
	}
	return src
}

// aClone is a pending clone of apps/src named name.
func aClone(name string, opts ...claimOpt) *v1.PersistentVolumeClaim {
	c := newClaim(cloneOf("src"), func(c *v1.PersistentVolumeClaim) {
		c.Name, c.UID = name, types.UID(name+"-uid")
	})
	for _, o := range opts {
		o(c)
	}
	return c
}

func boundTo(volume string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName, c.Status.Phase = volume, v1.ClaimBound }
}

// holdingRecord gives the claim tether's in-flight record for its volume
// pvc-<UID>.
func holdingRecord() claimOpt {
	return func(c *v1.PersistentVolumeClaim) { inflight.Record(c, driverNm, "pvc-"+string(c.UID)) }
}

func beingDeleted() claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}
		if len(c.Finalizers) == 0 {
			c.Finalizers = []string{"kubernetes.io/pvc-protection"}
		}
	}
}

func inNamespace(ns string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Namespace = ns }
}

func TestCloneInProgress(t *testing.T) {
	tests := []struct {
		name      string
		src       *v1.PersistentVolumeClaim
		claims    []*v1.PersistentVolumeClaim
		want      bool
		wantClone string
	}{
		{name: "no clone: source released", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{protectedSource(), newClaim()}},
		{name: "clone bound: source released", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", boundTo("pvc-c1-uid"))}},
		{name: "clone bound, its record not dropped yet: source released", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", holdingRecord(), boundTo("pvc-c1-uid"))}},
		{name: "clone bound to another volume while its own CreateVolume runs: source kept", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", holdingRecord(), boundTo("static-pv"))}, want: true, wantClone: "c1"},
		{name: "clone pending: source kept", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1")}, want: true, wantClone: "c1"},
		{name: "clone pending with its record: source kept", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", holdingRecord())}, want: true, wantClone: "c1"},
		{name: "clone deleted while its CreateVolume runs (holds the in-flight record): source kept", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", holdingRecord(), beingDeleted())}, want: true, wantClone: "c1"},
		{name: "clone deleted and its record gone: source released", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", beingDeleted())}},
		{name: "bound clone being deleted: source released", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", boundTo("pvc-c1-uid"), beingDeleted())}},
		{name: "source being deleted with a clone in progress: kept", src: protectedSource(beingDeleted()),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", holdingRecord())}, want: true, wantClone: "c1"},
		{name: "source being deleted, its clone done: released", src: protectedSource(beingDeleted()),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", boundTo("pvc-c1-uid"))}},
		{name: "two clones, one bound one pending: kept", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", boundTo("pvc-c1-uid")), aClone("c2")}, want: true, wantClone: "c2"},
		{name: "two clones, both bound: released", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", boundTo("pvc-c1-uid")), aClone("c2", boundTo("pvc-c2-uid"))}},
		{name: "claim of another namespace naming the same source: ignored", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", inNamespace("other"))}},
		{name: "clone of another source: ignored", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", cloneOf("elsewhere"))}},
		{name: "dataSourceRef instead of dataSource", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", func(c *v1.PersistentVolumeClaim) {
				c.Spec.DataSource = nil
				c.Spec.DataSourceRef = &v1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
			})}, want: true, wantClone: "c1"},
		{name: "dataSourceRef into another namespace: ignored", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", func(c *v1.PersistentVolumeClaim) {
				ns := "other"
				c.Spec.DataSource = nil
				c.Spec.DataSourceRef = &v1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src", Namespace: &ns}
			})}},
		{name: "a snapshot data source of the same name: ignored", src: protectedSource(),
			claims: []*v1.PersistentVolumeClaim{aClone("c1", func(c *v1.PersistentVolumeClaim) {
				group := "snapshot.storage.k8s.io"
				c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "src"}
			})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, clone := CloneInProgress(tt.src, tt.claims)
			if got != tt.want || clone != tt.wantClone {
				t.Errorf("CloneInProgress = %v, %q; want %v, %q", got, clone, tt.want, tt.wantClone)
			}
		})
	}
}

func TestCloneSourceName(t *testing.T) {
	core, other := "", "example.com"
	tests := []struct {
		name   string
		claim  *v1.PersistentVolumeClaim
		want   string
		wantOK bool
	}{
		{name: "no data source", claim: newClaim()},
		{name: "dataSource", claim: newClaim(cloneOf("src")), want: "src", wantOK: true},
		{name: "dataSource with the empty core group", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &core, Kind: "PersistentVolumeClaim", Name: "src"}
		}), want: "src", wantOK: true},
		{name: "a PersistentVolumeClaim kind of another group", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &other, Kind: "PersistentVolumeClaim", Name: "src"}
		})},
		{name: "dataSourceRef in the same namespace", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			ns := testNS
			c.Spec.DataSourceRef = &v1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src", Namespace: &ns}
		}), want: "src", wantOK: true},
		{name: "dataSourceRef of a populator", claim: newClaim(func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: &other, Kind: "Populator", Name: "src"}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := CloneSourceName(tt.claim)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("CloneSourceName = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// cloneProtectionEnv is the controller on a fake clientset, with a claim
// informer that is not started: the test puts claims into its store, and
// calls sync itself.
type cloneProtectionEnv struct {
	cs    *fake.Clientset
	inf   cache.SharedIndexInformer
	ctrl  *CloneProtection
	store cache.Store
}

func newCloneProtectionEnv(t *testing.T, claims ...*v1.PersistentVolumeClaim) *cloneProtectionEnv {
	t.Helper()
	cs := fake.NewClientset()
	inf := informers.NewSharedInformerFactory(cs, 0).Core().V1().PersistentVolumeClaims().Informer()
	ctrl, err := NewCloneProtection(CloneProtectionOptions{Client: cs, Claims: inf,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	e := &cloneProtectionEnv{cs: cs, inf: inf, ctrl: ctrl, store: inf.GetStore()}
	for _, c := range claims {
		if _, err := cs.CoreV1().PersistentVolumeClaims(c.Namespace).Create(t.Context(), c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *cloneProtectionEnv) sourceFinalizers(t *testing.T) []string {
	t.Helper()
	c, err := e.cs.CoreV1().PersistentVolumeClaims(testNS).Get(t.Context(), "src", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Finalizers
}

func TestCloneProtectionSync(t *testing.T) {
	tests := []struct {
		name   string
		claims []*v1.PersistentVolumeClaim
		key    string
		kept   bool
	}{
		{name: "clone bound: source released", key: "apps/src",
			claims: []*v1.PersistentVolumeClaim{protectedSource(), aClone("c1", boundTo("pvc-c1-uid"))}},
		{name: "clone pending: source kept", key: "apps/src", kept: true,
			claims: []*v1.PersistentVolumeClaim{protectedSource(), aClone("c1")}},
		{name: "clone deleted while its CreateVolume runs: source kept", key: "apps/src", kept: true,
			claims: []*v1.PersistentVolumeClaim{protectedSource(), aClone("c1", holdingRecord(), beingDeleted())}},
		{name: "source being deleted with a clone in progress: kept", key: "apps/src", kept: true,
			claims: []*v1.PersistentVolumeClaim{protectedSource(beingDeleted()), aClone("c1", holdingRecord())}},
		{name: "source being deleted, clone gone: released", key: "apps/src",
			claims: []*v1.PersistentVolumeClaim{protectedSource(beingDeleted())}},
		{name: "clone of another namespace: released", key: "apps/src",
			claims: []*v1.PersistentVolumeClaim{protectedSource(), aClone("c1", inNamespace("other"))}},
		{name: "a key that is not a protected source: nothing", key: "apps/c1", kept: true,
			claims: []*v1.PersistentVolumeClaim{protectedSource(), aClone("c1", boundTo("pvc-c1-uid"))}},
		{name: "a key of a claim that is gone: nothing", key: "apps/gone", kept: true,
			claims: []*v1.PersistentVolumeClaim{protectedSource(), aClone("c1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCloneProtectionEnv(t, tt.claims...)
			if err := e.ctrl.sync(t.Context(), tt.key); err != nil {
				t.Fatal(err)
			}
			fins := e.sourceFinalizers(t)
			if got := slices.Contains(fins, FinalizerCloneSource); got != tt.kept {
				t.Errorf("source finalizers %v: clone protection kept %v, want %v", fins, got, tt.kept)
			}
			if !slices.Contains(fins, "kubernetes.io/pvc-protection") {
				t.Errorf("source finalizers %v: another finalizer was removed", fins)
			}
		})
	}
}

// TestCloneProtectionKeepsASourceCloneTheCacheHasNotSeen: a clone another
// process runs (another node's provisioner), on the API server but not in
// this cache yet, keeps its source; once bound, the source is released.
func TestCloneProtectionKeepsASourceCloneTheCacheHasNotSeen(t *testing.T) {
	e := newCloneProtectionEnv(t, protectedSource())
	clone := aClone("c1", holdingRecord())
	if _, err := e.cs.CoreV1().PersistentVolumeClaims(testNS).Create(t.Context(), clone, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.sync(t.Context(), "apps/src"); err != nil {
		t.Fatal(err)
	}
	if fins := e.sourceFinalizers(t); !slices.Contains(fins, FinalizerCloneSource) {
		t.Fatalf("source finalizers %v: released while a clone its cache had not seen was in progress", fins)
	}
	bound := aClone("c1", boundTo("pvc-c1-uid"))
	if _, err := e.cs.CoreV1().PersistentVolumeClaims(testNS).Update(t.Context(), bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.sync(t.Context(), "apps/src"); err != nil {
		t.Fatal(err)
	}
	if fins := e.sourceFinalizers(t); slices.Contains(fins, FinalizerCloneSource) {
		t.Errorf("source finalizers %v: kept once its clone was bound", fins)
	}
}

// TestCloneProtectionSyncGoneSource: a source deleted from the API while
// the cache still has it needs nothing.
func TestCloneProtectionSyncGoneSource(t *testing.T) {
	e := newCloneProtectionEnv(t, protectedSource())
	if err := e.cs.CoreV1().PersistentVolumeClaims(testNS).Delete(t.Context(), "src", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.sync(t.Context(), "apps/src"); err != nil {
		t.Fatalf("sync of a source gone from the API: %v", err)
	}
}

// TestCloneProtectionEvents runs the controller on a started informer: a
// pending clone keeps its source, and the clone's binding releases it,
// through the clone's event alone.
func TestCloneProtectionEvents(t *testing.T) {
	cs := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().PersistentVolumeClaims().Informer()
	ctrl, err := NewCloneProtection(CloneProtectionOptions{Client: cs, Claims: inf,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pvcs := cs.CoreV1().PersistentVolumeClaims(testNS)
	if _, err := pvcs.Create(ctx, protectedSource(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pvcs.Create(ctx, aClone("c1", holdingRecord()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("cache not synced")
	}
	go ctrl.Run(ctx, 2)

	// The pending clone keeps the source (TestCloneProtectionSync checks
	// that decision; here the queue only has to drain without a removal).
	poll(t, "queue drained", func() bool { return ctrl.queue.Len() == 0 })
	src, err := pvcs.Get(ctx, "src", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(src.Finalizers, FinalizerCloneSource) {
		t.Fatalf("the source lost its clone protection while its clone is pending: %v", src.Finalizers)
	}

	clone, err := pvcs.Get(ctx, "c1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	boundTo("pvc-c1-uid")(clone)
	inflight.Forget(clone)
	if _, err := pvcs.Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "clone protection removed", func() bool {
		src, err := pvcs.Get(ctx, "src", metav1.GetOptions{})
		return err == nil && !slices.Contains(src.Finalizers, FinalizerCloneSource) &&
			slices.Contains(src.Finalizers, "kubernetes.io/pvc-protection")
	})
}

// poll waits for cond with a deadline.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
