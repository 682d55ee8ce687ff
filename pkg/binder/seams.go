package binder

import (
	"context"

	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Seams for the deterministic simulator (test/sim), which runs the
// binder's own handlers, syncs and writer one step at a time, from caches
// it delivers itself, instead of Run's informers and workers. Production
// code does not use them.

// SimInputs replace what Run would start: the class and node listers and
// the claim and volume queues (the queues New made are shut down).
type SimInputs struct {
	Classes                 storagelisters.StorageClassLister
	Nodes                   corelisters.NodeLister
	ClaimQueue, VolumeQueue workqueue.TypedRateLimitingInterface[string]
}

// UseSimInputs wires a Controller to the simulator's inputs.
func (c *Controller) UseSimInputs(in SimInputs) {
	c.claimQueue.ShutDown()
	c.volumeQueue.ShutDown()
	c.classLister, c.nodeLister = in.Classes, in.Nodes
	c.claimQueue, c.volumeQueue = in.ClaimQueue, in.VolumeQueue
}

// Handlers are the event handlers Run registers on the claim, volume and
// class informers.
func (c *Controller) Handlers() (claims, volumes, classes cache.ResourceEventHandler) {
	return c.claimHandler(), c.volumeHandler(), c.classHandler()
}

// SyncClaim syncs one claim (namespace/name), as a worker does.
func (c *Controller) SyncClaim(ctx context.Context, key string) error { return c.syncClaim(ctx, key) }

// SyncVolume syncs one volume, as a worker does.
func (c *Controller) SyncVolume(ctx context.Context, name string) error {
	return c.syncVolume(ctx, name)
}
