package provisioner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	"github.com/tether-csi/tether/pkg/provisioner/worker"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// The snapshot protection: Provision puts FinalizerSnapshotSource on a
// restore's VolumeSnapshot before CreateVolume; SnapshotProtection takes it
// off once no restore from that snapshot may still be running. Its
// decision is RestoreInProgress, a pure function of the snapshot and the
// claims that name it; its queue is fed by claim events (a restore's
// change queues its snapshot) and snapshot events (a protected snapshot
// queues itself).

// SnapshotProtectionOptions configure the snapshot protection controller.
type SnapshotProtectionOptions struct {
	// Client lists a snapshot's restores on the API server before it is
	// released (usedOnServer).
	Client         kubernetes.Interface
	SnapshotClient snapclientset.Interface
	// Claims is the shared claim informer; an index of restores by
	// snapshot is added to it, so it must not have been started yet.
	Claims cache.SharedIndexInformer
	// Snapshots is a VolumeSnapshot informer.
	Snapshots cache.SharedIndexInformer
	// RateLimiter paces retries of failed writes.
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
	queue    workqueue.TypedRateLimitingInterface[string] // restores.queue
}

// NewSnapshotProtection wires the controller to the informers.
func NewSnapshotProtection(o SnapshotProtectionOptions) (*SnapshotProtection, error) {
	if o.Client == nil || o.SnapshotClient == nil || o.Claims == nil || o.Snapshots == nil || o.RateLimiter == nil {
		return nil, errors.New("snapshot protection: a client, a snapshot client, the claim and snapshot informers and a rate limiter are required")
	}
	restores, err := newSourceUsers(o.Claims, "tether-snapshot-source", "snapshot-protection", o.RateLimiter, SnapshotSourceName)
	if err != nil {
		return nil, fmt.Errorf("snapshot protection: indexing claims by snapshot: %w", err)
	}
	c := &SnapshotProtection{o: o, restores: restores, queue: restores.queue}
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

// Run works the queue until ctx ends.
func (c *SnapshotProtection) Run(ctx context.Context, workers int) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName("snapshot-protection"))
	worker.Run(ctx, c.queue, workers, "volumesnapshot", "Releasing a snapshot; will retry", c.sync)
}

// sync removes the finalizer from the snapshot key when no restore from it
// is in progress. Any change of a restore queues the snapshot again.
func (c *SnapshotProtection) sync(ctx context.Context, key string) error {
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
// snapshot (the same UID), retrying conflicts.
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

// SnapshotSourceName is the name of the VolumeSnapshot a claim is restored
// from, in its own namespace.
func SnapshotSourceName(claim *v1.PersistentVolumeClaim) (string, bool) {
	ds, err := request.DataSourceOf(claim)
	if err != nil || ds.Kind != request.SnapshotSource {
		return "", false
	}
	return ds.Name, true
}

// RestoreInProgress reports whether a restore from snap may still be
// running, and names its claim. A restore is in progress as a clone is
// (see CloneInProgress): a claim being deleted that still holds its
// in-flight record, a live claim not bound yet (as the snapshot-controller
// and external-provisioner's sweep count them), and a bound claim whose
// record names another volume than its own.
func RestoreInProgress(snap *snapv1.VolumeSnapshot, claims []*v1.PersistentVolumeClaim) (bool, string) {
	for _, c := range claims {
		if c.Namespace != snap.Namespace {
			continue
		}
		if name, ok := SnapshotSourceName(c); !ok || name != snap.Name {
			continue
		}
		if cloneBusy(c) {
			return true, c.Name
		}
	}
	return false, ""
}
