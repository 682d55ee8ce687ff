package protect

import (
	"slices"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// aSnapshot is apps/snap bound to content-1, with the given finalizers.
func aSnapshot(finalizers ...string) *snapv1.VolumeSnapshot {
	return &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "snap", UID: "snap-uid", Finalizers: finalizers},
		Status: &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: ptr.To("content-1")}}
}

// aRestore is a pending claim named name restored from apps/snap.
func aRestore(name string, opts ...claimOpt) *v1.PersistentVolumeClaim {
	c := newClaim(func(c *v1.PersistentVolumeClaim) {
		c.Name, c.UID = name, types.UID(name+"-uid")
		c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: "snap"}
	})
	for _, o := range opts {
		o(c)
	}
	return c
}

func TestSnapshot(t *testing.T) {
	snap := aSnapshot()
	//lint:ignore SA1019 NewSimpleClientset is the only fake this clientset has
	cs := snapfake.NewSimpleClientset(snap)
	for range 2 { // the second call finds the finalizer and writes nothing
		if err := Snapshot(t.Context(), cs, snap); err != nil {
			t.Fatal(err)
		}
		got, err := cs.SnapshotV1().VolumeSnapshots(testNS).Get(t.Context(), "snap", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Finalizers, []string{FinalizerSnapshotSource}) {
			t.Fatalf("snapshot finalizers %v, want only %s", got.Finalizers, FinalizerSnapshotSource)
		}
		snap = got
	}
	updates := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "update" {
			updates++
		}
	}
	if updates != 1 {
		t.Errorf("%d updates of the snapshot, want 1", updates)
	}
}

func TestRestoreInProgress(t *testing.T) {
	tests := []struct {
		name      string
		claims    []*v1.PersistentVolumeClaim
		want      bool
		wantClaim string
	}{
		{name: "no restore: released"},
		{name: "restore pending: kept", claims: []*v1.PersistentVolumeClaim{aRestore("r1")}, want: true, wantClaim: "r1"},
		{name: "restore bound: released", claims: []*v1.PersistentVolumeClaim{aRestore("r1", boundTo("pvc-r1-uid"))}},
		{name: "restore bound to another volume while its own CreateVolume runs: kept",
			claims: []*v1.PersistentVolumeClaim{aRestore("r1", holdingRecord(), boundTo("static-pv"))}, want: true, wantClaim: "r1"},
		{name: "restore deleted while its CreateVolume runs: kept",
			claims: []*v1.PersistentVolumeClaim{aRestore("r1", holdingRecord(), beingDeleted())}, want: true, wantClaim: "r1"},
		{name: "restore deleted, its record gone: released", claims: []*v1.PersistentVolumeClaim{aRestore("r1", beingDeleted())}},
		{name: "restore of another namespace: ignored", claims: []*v1.PersistentVolumeClaim{aRestore("r1", inNamespace("other"))}},
		{name: "a clone of a claim of the snapshot's name: ignored", claims: []*v1.PersistentVolumeClaim{aClone("r1", cloneOf("snap"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, claim := RestoreInProgress(aSnapshot(FinalizerSnapshotSource), tt.claims)
			if got != tt.want || claim != tt.wantClaim {
				t.Errorf("RestoreInProgress = %v, %q; want %v, %q", got, claim, tt.want, tt.wantClaim)
			}
		})
	}
}

// snapshotProtectionEnv is the controller on fake clientsets, with
// informers that are not started and the queue it was given: the test
// puts objects into the stores, and calls Reconcile itself.
type snapshotProtectionEnv struct {
	cs     *fake.Clientset
	snaps  *snapfake.Clientset
	claims cache.SharedIndexInformer
	queue  workqueue.TypedRateLimitingInterface[string]
	ctrl   *SnapshotProtection
}

func newSnapshotProtectionEnv(t *testing.T, claims ...*v1.PersistentVolumeClaim) *snapshotProtectionEnv {
	t.Helper()
	snap := aSnapshot("snapshot.storage.kubernetes.io/volumesnapshot-bound-protection", FinalizerSnapshotSource)
	//lint:ignore SA1019 NewSimpleClientset is the only fake this clientset has
	e := &snapshotProtectionEnv{cs: fake.NewClientset(), snaps: snapfake.NewSimpleClientset(snap),
		claims: cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.PersistentVolumeClaim{}, 0, cache.Indexers{}),
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	t.Cleanup(e.queue.ShutDown)
	snapshots := cache.NewSharedIndexInformer(&cache.ListWatch{}, &snapv1.VolumeSnapshot{}, 0, cache.Indexers{})
	var err error
	e.ctrl, err = NewSnapshotProtection(SnapshotProtectionOptions{Client: e.cs, SnapshotClient: e.snaps,
		Claims: e.claims, Snapshots: snapshots, Queue: e.queue})
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshots.GetStore().Add(snap); err != nil {
		t.Fatal(err)
	}
	for _, c := range claims {
		if _, err := e.cs.CoreV1().PersistentVolumeClaims(c.Namespace).Create(t.Context(), c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.claims.GetStore().Add(c); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// protected reports whether apps/snap still carries the restore
// finalizer, and fails if it lost another.
func (e *snapshotProtectionEnv) protected(t *testing.T) bool {
	t.Helper()
	s, err := e.snaps.SnapshotV1().VolumeSnapshots(testNS).Get(t.Context(), "snap", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.Finalizers, "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection") {
		t.Errorf("snapshot finalizers %v: another finalizer was removed", s.Finalizers)
	}
	return slices.Contains(s.Finalizers, FinalizerSnapshotSource)
}

func TestSnapshotProtectionReconcile(t *testing.T) {
	tests := []struct {
		name   string
		claims []*v1.PersistentVolumeClaim
		key    string
		kept   bool
	}{
		{name: "restore bound: released", key: "apps/snap", claims: []*v1.PersistentVolumeClaim{aRestore("r1", boundTo("pvc-r1-uid"))}},
		{name: "no restore: released", key: "apps/snap"},
		{name: "restore pending: kept", key: "apps/snap", kept: true, claims: []*v1.PersistentVolumeClaim{aRestore("r1")}},
		{name: "restore deleted while its CreateVolume runs: kept", key: "apps/snap", kept: true,
			claims: []*v1.PersistentVolumeClaim{aRestore("r1", holdingRecord(), beingDeleted())}},
		{name: "a key that is not a snapshot of the cache: nothing", key: "apps/gone", kept: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newSnapshotProtectionEnv(t, tt.claims...)
			if err := e.ctrl.Reconcile(t.Context(), tt.key); err != nil {
				t.Fatal(err)
			}
			if got := e.protected(t); got != tt.kept {
				t.Errorf("snapshot protection kept %v, want %v", got, tt.kept)
			}
		})
	}
}

// TestSnapshotProtectionKeepsASnapshotRestoreTheCacheHasNotSeen: a restore
// another process runs, on the API server but not in this cache yet, keeps
// its snapshot; once bound, the snapshot is released.
func TestSnapshotProtectionKeepsASnapshotRestoreTheCacheHasNotSeen(t *testing.T) {
	e := newSnapshotProtectionEnv(t)
	if _, err := e.cs.CoreV1().PersistentVolumeClaims(testNS).Create(t.Context(), aRestore("r1", holdingRecord()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.Reconcile(t.Context(), "apps/snap"); err != nil {
		t.Fatal(err)
	}
	if !e.protected(t) {
		t.Fatal("released while a restore its cache had not seen was in progress")
	}
	if _, err := e.cs.CoreV1().PersistentVolumeClaims(testNS).Update(t.Context(), aRestore("r1", boundTo("pvc-r1-uid")), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.Reconcile(t.Context(), "apps/snap"); err != nil {
		t.Fatal(err)
	}
	if e.protected(t) {
		t.Error("kept once its restore was bound")
	}
}

// TestSnapshotProtectionQueue: the queue given as an option is the one
// the claim informer's events feed, with the key of a restore's snapshot.
func TestSnapshotProtectionQueue(t *testing.T) {
	ctx := t.Context()
	cs := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(cs, 0)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	t.Cleanup(queue.ShutDown)
	//lint:ignore SA1019 NewSimpleClientset is the only fake this clientset has
	snaps := snapfake.NewSimpleClientset()
	if _, err := NewSnapshotProtection(SnapshotProtectionOptions{Client: cs, SnapshotClient: snaps,
		Claims:    factory.Core().V1().PersistentVolumeClaims().Informer(),
		Snapshots: cache.NewSharedIndexInformer(&cache.ListWatch{}, &snapv1.VolumeSnapshot{}, 0, cache.Indexers{}),
		Queue:     queue}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if _, err := cs.CoreV1().PersistentVolumeClaims(testNS).Create(ctx, aRestore("r1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the restore's snapshot queued", func() bool { return queue.Len() == 1 })
	if key, _ := queue.Get(); key != "apps/snap" {
		t.Errorf("queued %q, want apps/snap", key)
	}
}
