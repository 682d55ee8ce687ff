package binder

import (
	"context"
	"time"

	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Seams for the deterministic simulator (test/sim), which runs the
// binder's own handlers, syncs and writer one step at a time, from caches
// it delivers itself, instead of Run's informers and workers. Production
// code does not use them.

// SimInputs replace what Run would start: the claim, volume and class
// informers (the handlers that fill the Store and the Index are registered
// on them, as New does on its own), the node lister and whether it has
// synced, and the claim and volume queues (the queues New made are shut
// down).
type SimInputs struct {
	Claims, Volumes, Classes cache.SharedIndexInformer
	Nodes                    corelisters.NodeLister
	NodesSynced              cache.InformerSynced
	// NodeEvents, when set, feeds the node-loss tracker (as New's node
	// informer does).
	NodeEvents              cache.SharedIndexInformer
	ClaimQueue, VolumeQueue workqueue.TypedRateLimitingInterface[string]
	// KCM: the binder stands for kube-controller-manager's, which leaves
	// the provisioner's in-flight record on the claims it binds.
	KCM bool
}

// UseSimInputs wires a Controller to the simulator's inputs.
func (c *Controller) UseSimInputs(in SimInputs) error {
	c.claimQueue.ShutDown()
	c.volumeQueue.ShutDown()
	c.classLister, c.nodeLister = storagelisters.NewStorageClassLister(in.Classes.GetIndexer()), in.Nodes
	c.claimQueue, c.volumeQueue = in.ClaimQueue, in.VolumeQueue
	c.writer.keepRecords = in.KCM
	if err := c.watch(in.Claims, in.Volumes, in.Classes, in.NodesSynced); err != nil {
		return err
	}
	if in.NodeEvents != nil {
		return c.watchNodes(in.NodeEvents)
	}
	return nil
}

// SetClock sets the binder's clock (node loss times its grace with it).
func (c *Controller) SetClock(now func() time.Time) { c.now = now }

// Synced reports whether Run's workers would have started: what they wait
// for (see watch) has synced.
func (c *Controller) Synced() bool {
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// QueueFirstLists queues what of the first lists needs a sync, once, as
// Run does when the caches have synced and the workers start.
func (c *Controller) QueueFirstLists() { c.queueFirstLists() }

// SyncClaim syncs one claim (namespace/name), as a worker does.
func (c *Controller) SyncClaim(ctx context.Context, key string) error { return c.syncClaim(ctx, key) }

// SyncVolume syncs one volume, as a worker does.
func (c *Controller) SyncVolume(ctx context.Context, name string) error {
	return c.syncVolume(ctx, name)
}

// NodesTracked is how many nodes the node-loss tracker holds: those that
// exist and those deleted within twice the grace.
func (c *Controller) NodesTracked() int { return c.nodeLoss.tracker.Len() }

// KnowsNode reports whether the node-loss tracker knows a node (it has
// not forgotten it, or never saw it).
func (c *Controller) KnowsNode(name string) bool {
	_, known := c.nodeLoss.tracker.Get(name)
	return known
}
