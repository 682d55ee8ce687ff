package binder

import (
	"context"
)

// The steps Run takes: its workers call SyncClaim and SyncVolume for each
// key of their queues, once Synced, after QueueFirstLists. The
// deterministic simulator (test/sim) takes the same steps one at a time,
// on caches and queues it delivers itself (Options.Inputs). NodesTracked
// and KnowsNode let a caller observe the node-loss tracker.

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

// SyncClaim syncs one claim (namespace/name): one worker step.
func (c *Controller) SyncClaim(ctx context.Context, key string) error { return c.syncClaim(ctx, key) }

// SyncVolume syncs one volume: one worker step.
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
