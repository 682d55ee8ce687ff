package protect

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

	"github.com/tether-csi/tether/pkg/provisioner/worker"
)

// CloneProtectionOptions configure the clone protection controller.
type CloneProtectionOptions struct {
	// Client lists a source's clones on the API server before it is
	// released (usedOnServer), and removes the finalizer.
	Client kubernetes.Interface
	// Claims is the shared claim informer; an index of clones by source
	// is added to it, so it must not have been started yet.
	Claims cache.SharedIndexInformer
	// Queue is the work queue of source claim keys (namespace/name) that
	// the informer's events feed and Reconcile works off; nil makes one
	// paced by RateLimiter.
	Queue workqueue.TypedRateLimitingInterface[string]
	// RateLimiter paces retries of failed writes; it is required when
	// Queue is nil.
	RateLimiter workqueue.TypedRateLimiter[string]
}

// CloneProtection removes FinalizerCloneSource from source claims whose
// clones are done. external-provisioner does the same from its
// CloningProtectionController, but only once a source is being deleted;
// tether releases a source as soon as no clone of it is in progress.
type CloneProtection struct {
	o      CloneProtectionOptions
	clones *sourceUsers
	queue  workqueue.TypedRateLimitingInterface[string]
}

// NewCloneProtection wires the controller to the claim informer. Every
// event of a clone queues its source; every add or update of a claim that
// holds FinalizerCloneSource queues that claim.
func NewCloneProtection(o CloneProtectionOptions) (*CloneProtection, error) {
	if o.Client == nil || o.Claims == nil || (o.Queue == nil && o.RateLimiter == nil) {
		return nil, errors.New("clone protection: a client, the claim informer and a queue or a rate limiter are required")
	}
	queue := o.Queue
	if queue == nil {
		queue = workqueue.NewTypedRateLimitingQueueWithConfig(o.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "clone-protection"})
	}
	clones, err := newSourceUsers(o.Claims, "tether-clone-source", queue, CloneSourceName)
	if err != nil {
		return nil, fmt.Errorf("clone protection: indexing claims by clone source: %w", err)
	}
	c := &CloneProtection{o: o, clones: clones, queue: queue}
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

// Run works the queue with workers goroutines, each calling Reconcile,
// until ctx ends.
func (c *CloneProtection) Run(ctx context.Context, workers int) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName("clone-protection"))
	worker.Run(ctx, c.queue, workers, "pvc", "Releasing a clone source; will retry", c.Reconcile)
}

// Reconcile is one worker step: Run's workers call it with a key of the
// queue, and retry the key, rate limited, when it fails. It removes
// FinalizerCloneSource from the claim key when neither the claim cache
// nor the API server shows a clone of it in progress (CloneInProgress).
// Any change of a clone queues its source again, so a source kept now is
// looked at once more when its clones move on. A key that is not a
// protected claim of the cache needs nothing.
func (c *CloneProtection) Reconcile(ctx context.Context, key string) error {
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
	if err := releaseClaim(ctx, c.o.Client, src); err != nil {
		return fmt.Errorf("removing the clone protection: %w", err)
	}
	logger.V(2).Info("Clone source released: no clone of it in progress")
	return nil
}
