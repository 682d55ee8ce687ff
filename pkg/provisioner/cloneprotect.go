package provisioner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/records"
	"github.com/tether-csi/tether/pkg/provisioner/worker"
)

// The clone protection: Provision puts FinalizerCloneSource on a clone's
// source claim before CreateVolume; CloneProtection takes it off once no
// clone of that source may still be copying it. Its decision is
// CloneInProgress, a pure function of the source and the claims that name
// it; its queue is fed by claim events (a clone's change queues its source,
// a protected source queues itself).

// CloneProtectionOptions configure the clone protection controller.
type CloneProtectionOptions struct {
	Client kubernetes.Interface
	// Claims is the shared claim informer; an index of clones by source
	// is added to it, so it must not have been started yet.
	Claims cache.SharedIndexInformer
	// RateLimiter paces retries of failed writes.
	RateLimiter workqueue.TypedRateLimiter[string]
}

// CloneProtection removes FinalizerCloneSource from source claims whose
// clones are done. external-provisioner does the same from its
// CloningProtectionController, but only once a source is being deleted;
// tether releases a source as soon as no clone of it is in progress.
type CloneProtection struct {
	o      CloneProtectionOptions
	clones *sourceUsers
	queue  workqueue.TypedRateLimitingInterface[string] // clones.queue
}

// NewCloneProtection wires the controller to the claim informer.
func NewCloneProtection(o CloneProtectionOptions) (*CloneProtection, error) {
	if o.Client == nil || o.Claims == nil || o.RateLimiter == nil {
		return nil, errors.New("clone protection: a client, the claim informer and a rate limiter are required")
	}
	clones, err := newSourceUsers(o.Claims, "tether-clone-source", "clone-protection", o.RateLimiter, CloneSourceName)
	if err != nil {
		return nil, fmt.Errorf("clone protection: indexing claims by clone source: %w", err)
	}
	c := &CloneProtection{o: o, clones: clones, queue: clones.queue}
	// A protected source queues itself too.
	queueProtected := func(obj any) {
		if claim := claimOf(obj); claim != nil && slices.Contains(claim.Finalizers, FinalizerCloneSource) {
			c.queue.Add(claim.Namespace + "/" + claim.Name)
		}
	}
	if _, err := o.Claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    queueProtected,
		UpdateFunc: func(_, obj any) { queueProtected(obj) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run works the queue until ctx ends.
func (c *CloneProtection) Run(ctx context.Context, workers int) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName("clone-protection"))
	worker.Run(ctx, c.queue, workers, "pvc", "Releasing a clone source; will retry", c.sync)
}

// sync removes the clone finalizer from the claim key when no clone of it
// is in progress. Any change of a clone queues the source again, so a
// source kept now is looked at once more when its clones move on.
func (c *CloneProtection) sync(ctx context.Context, key string) error {
	obj, exists, err := c.o.Claims.GetStore().GetByKey(key)
	if err != nil || !exists {
		return err
	}
	src, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok || !slices.Contains(src.Finalizers, FinalizerCloneSource) {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("pvc", klog.KObj(src))
	clones, err := c.clones.of(key)
	if err != nil {
		return err
	}
	if busy, clone := CloneInProgress(src, clones); busy {
		logger.V(4).Info("Clone source kept: a clone is in progress", "clone", clone)
		return nil
	}
	busy, clone, err := usedOnServer(ctx, c.o.Client, src.Namespace, func(cs []*v1.PersistentVolumeClaim) (bool, string) {
		return CloneInProgress(src, cs)
	})
	if err != nil {
		return fmt.Errorf("listing the clones of the source: %w", err)
	}
	if busy {
		// This cache has not seen the clone yet; its event queues the
		// source again.
		logger.V(2).Info("Clone source kept: the API server shows a clone of it in progress", "clone", clone)
		return nil
	}
	err = records.UpdateClaim(ctx, c.o.Client, src.Namespace, src.Name, func(fresh *v1.PersistentVolumeClaim) bool {
		if fresh.UID != src.UID || !slices.Contains(fresh.Finalizers, FinalizerCloneSource) {
			return false
		}
		fresh.Finalizers = slices.DeleteFunc(fresh.Finalizers, func(f string) bool { return f == FinalizerCloneSource })
		return true
	})
	if err != nil {
		return fmt.Errorf("removing the clone protection: %w", err)
	}
	logger.V(2).Info("Clone source released: no clone of it in progress")
	return nil
}

// CloneSourceName is the name of the claim that claim is cloned from, in
// its own namespace: spec.dataSource, else spec.dataSourceRef, of kind
// PersistentVolumeClaim in the core group. A dataSourceRef into another
// namespace is not a clone source here.
func CloneSourceName(claim *v1.PersistentVolumeClaim) (string, bool) {
	if ds := claim.Spec.DataSource; ds != nil && isClaimKind(ds.Kind, ds.APIGroup) && ds.Name != "" {
		return ds.Name, true
	}
	if ref := claim.Spec.DataSourceRef; ref != nil && isClaimKind(ref.Kind, ref.APIGroup) && ref.Name != "" &&
		(ref.Namespace == nil || *ref.Namespace == "" || *ref.Namespace == claim.Namespace) {
		return ref.Name, true
	}
	return "", false
}

func isClaimKind(kind string, group *string) bool {
	return kind == "PersistentVolumeClaim" && (group == nil || *group == "")
}

// CloneInProgress reports whether a clone of src may still be copying it,
// and names that clone. claims may hold any claims; only those of src's
// namespace that name src as their source count. A clone is in progress
// when:
//   - it is being deleted and still holds tether's in-flight record: its
//     CreateVolume may still run (or be repeated by the clean-up) until
//     the record goes;
//   - it is live and not bound yet (no spec.volumeName), as in
//     external-provisioner, where a Pending clone keeps its source;
//   - it is bound, but its in-flight record names another volume than the
//     one it is bound to: its own CreateVolume may still run.
//
// A bound clone is otherwise done: its volume exists and a PV tracks it.
// Whether src itself is being deleted does not matter: that is what the
// protection is for.
func CloneInProgress(src *v1.PersistentVolumeClaim, claims []*v1.PersistentVolumeClaim) (bool, string) {
	for _, c := range claims {
		if c.Namespace != src.Namespace || c.UID == src.UID {
			continue
		}
		if name, ok := CloneSourceName(c); !ok || name != src.Name {
			continue
		}
		if cloneBusy(c) {
			return true, c.Name
		}
	}
	return false, ""
}

func cloneBusy(c *v1.PersistentVolumeClaim) bool {
	switch {
	case c.DeletionTimestamp != nil:
		return inflight.Holds(c)
	case c.Spec.VolumeName == "":
		return true
	case inflight.Holds(c):
		_, name, ok := inflight.Volume(c)
		return ok && name != c.Spec.VolumeName
	}
	return false
}
