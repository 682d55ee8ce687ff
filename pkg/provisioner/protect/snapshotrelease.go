package protect

import (
	"context"
	"errors"
	"fmt"
	"slices"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/provisioner/worker"
)

// SnapshotProtectionOptions configure the snapshot protection controller.
type SnapshotProtectionOptions struct {
	// Client lists a snapshot's restores on the API server before it is
	// released (usedOnServer).
	Client kubernetes.Interface
	// SnapshotClient removes the finalizer.
	SnapshotClient snapclientset.Interface
	// Claims is the shared claim informer; an index of restores by
	// snapshot is added to it, so it must not have been started yet.
	Claims cache.SharedIndexInformer
	// Snapshots is a VolumeSnapshot informer.
	Snapshots cache.SharedIndexInformer
	// Queue is the work queue of snapshot keys (namespace/name) that the
	// informers' events feed and Reconcile works off; nil makes one paced
	// by RateLimiter.
	Queue workqueue.TypedRateLimitingInterface[string]
	// RateLimiter paces retries of failed writes; it is required when
	// Queue is nil.
	RateLimiter workqueue.TypedRateLimiter[string]
}

// SnapshotProtection removes FinalizerSnapshotSource from VolumeSnapshots
// whose restores are done. external-provisioner removes it right after
// CreateVolume, before the PV is saved, and sweeps leftovers every
// --snapshot-orphan-sweep-interval; tether keeps it until the restored
// claim is bound (or gone), so that a repeated CreateVolume (a restarted
// provisioner, or the clean-up of a deleted claim) still finds the
// snapshot, and releases it on the claim's event, without a sweep.
type SnapshotProtection struct {
	o        SnapshotProtectionOptions
	restores *sourceUsers
	queue    workqueue.TypedRateLimitingInterface[string]
}

// NewSnapshotProtection wires the controller to the informers. Every
// event of a restore's claim queues its snapshot; every add or update of
// a snapshot that holds FinalizerSnapshotSource queues that snapshot.
func NewSnapshotProtection(o SnapshotProtectionOptions) (*SnapshotProtection, error) {
	if o.Client == nil || o.SnapshotClient == nil || o.Claims == nil || o.Snapshots == nil || (o.Queue == nil && o.RateLimiter == nil) {
		return nil, errors.New("snapshot protection: a client, a snapshot client, the claim and snapshot informers and a queue or a rate limiter are required")
	}
	queue := o.Queue
	if queue == nil {
		queue = workqueue.NewTypedRateLimitingQueueWithConfig(o.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "snapshot-protection"})
	}
	restores, err := newSourceUsers(o.Claims, "tether-snapshot-source", queue, SnapshotSourceName)
	if err != nil {
		return nil, fmt.Errorf("snapshot protection: indexing claims by snapshot: %w", err)
	}
	c := &SnapshotProtection{o: o, restores: restores, queue: queue}
	// A protected snapshot queues itself.
	onSnapshot := func(obj any) {
		if s, ok := obj.(*snapv1.VolumeSnapshot); ok && slices.Contains(s.Finalizers, FinalizerSnapshotSource) {
			c.queue.Add(s.Namespace + "/" + s.Name)
		}
	}
	if _, err := o.Snapshots.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onSnapshot,
		UpdateFunc: func(_, obj any) { onSnapshot(obj) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run works the queue with workers goroutines, each calling Reconcile,
// until ctx ends.
func (c *SnapshotProtection) Run(ctx context.Context, workers int) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName("snapshot-protection"))
	worker.Run(ctx, c.queue, workers, "volumesnapshot", "Releasing a snapshot; will retry", c.Reconcile)
}

// Reconcile is one worker step: Run's workers call it with a key of the
// queue, and retry the key, rate limited, when it fails. It removes
// FinalizerSnapshotSource from the snapshot key when neither the claim
// cache nor the API server shows a restore from it in progress
// (RestoreInProgress). Any change of a restore queues its snapshot again.
// A key that is not a protected snapshot of the cache needs nothing.
func (c *SnapshotProtection) Reconcile(ctx context.Context, key string) error {
	obj, exists, err := c.o.Snapshots.GetStore().GetByKey(key)
	if err != nil || !exists {
		return err
	}
	snap, ok := obj.(*snapv1.VolumeSnapshot)
	if !ok || !slices.Contains(snap.Finalizers, FinalizerSnapshotSource) {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("volumesnapshot", klog.KObj(snap))
	claims, err := c.restores.of(key)
	if err != nil {
		return err
	}
	if busy, claim := RestoreInProgress(snap, claims); busy {
		logger.V(4).Info("Snapshot kept: a restore from it is in progress", "pvc", claim)
		return nil
	}
	busy, claim, err := usedOnServer(ctx, c.o.Client, snap.Namespace, func(cs []*v1.PersistentVolumeClaim) (bool, string) {
		return RestoreInProgress(snap, cs)
	})
	if err != nil {
		return fmt.Errorf("listing the restores of the snapshot: %w", err)
	}
	if busy {
		// This cache has not seen the claim yet; its event queues the
		// snapshot again.
		logger.V(2).Info("Snapshot kept: the API server shows a restore from it in progress", "pvc", claim)
		return nil
	}
	if err := releaseSnapshot(ctx, c.o.SnapshotClient, snap); err != nil {
		return fmt.Errorf("removing the snapshot protection: %w", err)
	}
	logger.V(2).Info("Snapshot released: no restore from it in progress")
	return nil
}

// releaseSnapshot removes FinalizerSnapshotSource from a fresh copy of the
// snapshot (the same UID), retrying conflicts. A snapshot that is gone
// needs nothing.
func releaseSnapshot(ctx context.Context, client snapclientset.Interface, snap *snapv1.VolumeSnapshot) error {
	snaps := client.SnapshotV1().VolumeSnapshots(snap.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh, err := snaps.Get(ctx, snap.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if fresh.UID != snap.UID || !slices.Contains(fresh.Finalizers, FinalizerSnapshotSource) {
			return nil
		}
		fresh.Finalizers = slices.DeleteFunc(fresh.Finalizers, func(f string) bool { return f == FinalizerSnapshotSource })
		_, err = snaps.Update(ctx, fresh, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}
