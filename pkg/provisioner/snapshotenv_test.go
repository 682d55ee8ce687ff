package provisioner

import (
	"fmt"
	"slices"
	"strconv"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// snapEnv adds the snapshot API to an env: a fake snapshot clientset with
// the finalizer semantics that matter (deletion held by finalizers, no new
// finalizer on a snapshot being deleted, resourceVersion conflicts), a
// VolumeSnapshot informer the test refreshes, and the protection
// controller.
type snapEnv struct {
	*env
	snapClient *snapfake.Clientset
	snapshots  cache.SharedIndexInformer
	protection *protect.SnapshotProtection
}

var snapshotsGVR = schema.GroupVersionResource{Group: snapv1.GroupName, Version: "v1", Resource: "volumesnapshots"}

// newSnapEnv is an env whose driver has CREATE_DELETE_SNAPSHOT, with the
// ready snapshot apps/snap and its content.
func newSnapEnv(e *env, prevent bool) *snapEnv {
	e.t.Helper()
	snap, content := readySnapshot()
	// The snapshot client has no apply configurations, so no NewClientset.
	//lint:ignore SA1019 NewSimpleClientset is the only fake this clientset has
	s := &snapEnv{env: e, snapClient: snapfake.NewSimpleClientset(snap, content)}
	s.snapSemantics()
	e.p.o.Snapshots, e.p.o.SnapshotClient, e.p.o.PreventVolumeModeConversion = true, s.snapClient, prevent
	s.snapshots = cache.NewSharedIndexInformer(&cache.ListWatch{}, &snapv1.VolumeSnapshot{}, 0, cache.Indexers{})
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	e.t.Cleanup(queue.ShutDown)
	var err error
	s.protection, err = protect.NewSnapshotProtection(protect.SnapshotProtectionOptions{Client: e.client, SnapshotClient: s.snapClient, Claims: e.claims,
		Snapshots: s.snapshots, Queue: queue})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (s *snapEnv) snapSemantics() {
	tracker := s.snapClient.Tracker()
	rv := 500
	s.snapClient.PrependReactor("update", "volumesnapshots", func(a k8stesting.Action) (bool, runtime.Object, error) {
		snap := a.(k8stesting.UpdateAction).GetObject().(*snapv1.VolumeSnapshot).DeepCopy()
		obj, err := tracker.Get(snapshotsGVR, snap.Namespace, snap.Name)
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*snapv1.VolumeSnapshot)
		if snap.ResourceVersion != "" && snap.ResourceVersion != cur.ResourceVersion {
			return true, nil, apierrors.NewConflict(snapshotsGVR.GroupResource(), snap.Name, fmt.Errorf("the object has been modified"))
		}
		if cur.DeletionTimestamp != nil {
			for _, f := range snap.Finalizers {
				if !slices.Contains(cur.Finalizers, f) {
					return true, nil, apierrors.NewForbidden(snapshotsGVR.GroupResource(), snap.Name, fmt.Errorf("no new finalizers can be added if the object is being deleted"))
				}
			}
			snap.DeletionTimestamp = cur.DeletionTimestamp
			if len(snap.Finalizers) == 0 {
				return true, snap, tracker.Delete(snapshotsGVR, snap.Namespace, snap.Name)
			}
		}
		rv++
		snap.ResourceVersion = strconv.Itoa(rv)
		return true, snap, tracker.Update(snapshotsGVR, snap, snap.Namespace)
	})
	s.snapClient.PrependReactor("delete", "volumesnapshots", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		obj, err := tracker.Get(snapshotsGVR, d.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*snapv1.VolumeSnapshot).DeepCopy()
		if len(cur.Finalizers) == 0 {
			return true, nil, tracker.Delete(snapshotsGVR, cur.Namespace, cur.Name)
		}
		if cur.DeletionTimestamp == nil {
			now := metav1.NewTime(s.clock)
			cur.DeletionTimestamp = &now
			rv++
			cur.ResourceVersion = strconv.Itoa(rv)
		}
		return true, cur, tracker.Update(snapshotsGVR, cur, cur.Namespace)
	})
}

// refresh makes every cache, the snapshots' too, catch up with the API.
func (s *snapEnv) refresh() {
	s.t.Helper()
	s.env.refresh()
	list, err := s.snapClient.SnapshotV1().VolumeSnapshots("").List(s.ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	objs := make([]any, 0, len(list.Items))
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	if err := s.snapshots.GetStore().Replace(objs, ""); err != nil {
		s.t.Fatal(err)
	}
}

// snapshot is apps/snap as the API server has it, nil when gone.
func (s *snapEnv) snapshot() *snapv1.VolumeSnapshot {
	s.t.Helper()
	snap, err := s.snapClient.SnapshotV1().VolumeSnapshots(testNS).Get(s.ctx, testSnap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		s.t.Fatal(err)
	}
	return snap
}

// protected reports whether apps/snap carries the restore finalizer.
func (s *snapEnv) protected() bool {
	snap := s.snapshot()
	return snap != nil && slices.Contains(snap.Finalizers, protect.FinalizerSnapshotSource)
}

// deleteSnapshot is a user deleting apps/snap.
func (s *snapEnv) deleteSnapshot() {
	s.t.Helper()
	if err := s.snapClient.SnapshotV1().VolumeSnapshots(testNS).Delete(s.ctx, testSnap, metav1.DeleteOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// changeSnapshot edits apps/snap or its content in the API.
func (s *snapEnv) changeSnapshot(change func(*snapv1.VolumeSnapshot, *snapv1.VolumeSnapshotContent)) {
	s.t.Helper()
	snaps := s.snapClient.SnapshotV1()
	snap := s.snapshot()
	content, err := snaps.VolumeSnapshotContents().Get(s.ctx, testContent, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	change(snap, content)
	if _, err := snaps.VolumeSnapshots(testNS).Update(s.ctx, snap, metav1.UpdateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	if _, err := snaps.VolumeSnapshotContents().Update(s.ctx, content, metav1.UpdateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// release runs one step of the snapshot protection for apps/snap.
func (s *snapEnv) release() {
	s.t.Helper()
	if err := s.protection.Reconcile(s.ctx, testNS+"/"+testSnap); err != nil {
		s.t.Fatalf("snapshot protection: %v", err)
	}
}
