package protect

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/tether-csi/tether/pkg/inflight"
)

// cloneProtectionEnv is the controller on a fake clientset, with a claim
// informer that is not started: the test puts claims into its store, and
// calls Reconcile itself.
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

func TestCloneProtectionReconcile(t *testing.T) {
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
			if err := e.ctrl.Reconcile(t.Context(), tt.key); err != nil {
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
	if err := e.ctrl.Reconcile(t.Context(), "apps/src"); err != nil {
		t.Fatal(err)
	}
	if fins := e.sourceFinalizers(t); !slices.Contains(fins, FinalizerCloneSource) {
		t.Fatalf("source finalizers %v: released while a clone its cache had not seen was in progress", fins)
	}
	bound := aClone("c1", boundTo("pvc-c1-uid"))
	if _, err := e.cs.CoreV1().PersistentVolumeClaims(testNS).Update(t.Context(), bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.Reconcile(t.Context(), "apps/src"); err != nil {
		t.Fatal(err)
	}
	if fins := e.sourceFinalizers(t); slices.Contains(fins, FinalizerCloneSource) {
		t.Errorf("source finalizers %v: kept once its clone was bound", fins)
	}
}

// TestCloneProtectionReconcileGoneSource: a source deleted from the API while
// the cache still has it needs nothing.
func TestCloneProtectionReconcileGoneSource(t *testing.T) {
	e := newCloneProtectionEnv(t, protectedSource())
	if err := e.cs.CoreV1().PersistentVolumeClaims(testNS).Delete(t.Context(), "src", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.Reconcile(t.Context(), "apps/src"); err != nil {
		t.Fatalf("Reconcile of a source gone from the API: %v", err)
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

	// The pending clone keeps the source (TestCloneProtectionReconcile checks
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
