package provisioner

import (
	"context"

	"k8s.io/client-go/util/workqueue"
)

// Seams for the deterministic simulator (test/sim), which runs this
// package's own code one step at a time: it sets the clocks, replaces the
// reconciler's queue with one in its own time, and calls the sync itself.
// Production code does not use them.

// SetQueue replaces the clone protection's work queue (the one it was made
// with is shut down). Call it before the informers deliver anything.
func (c *CloneProtection) SetQueue(q workqueue.TypedRateLimitingInterface[string]) {
	c.queue.ShutDown()
	c.queue, c.clones.queue = q, q
}

// Sync releases one clone source if no clone of it is in progress, as a
// worker of Run does.
func (c *CloneProtection) Sync(ctx context.Context, key string) error { return c.sync(ctx, key) }

// SetQueue replaces the snapshot protection's work queue (the one it was
// made with is shut down). Call it before the informers deliver anything.
func (c *SnapshotProtection) SetQueue(q workqueue.TypedRateLimitingInterface[string]) {
	c.queue.ShutDown()
	c.queue, c.restores.queue = q, q
}

// Sync releases one snapshot if no restore from it is in progress, as a
// worker of Run does.
func (c *SnapshotProtection) Sync(ctx context.Context, key string) error { return c.sync(ctx, key) }
