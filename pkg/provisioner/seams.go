package provisioner

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Seams for the deterministic simulator (test/sim), which runs this
// package's own code one step at a time: it sets the clocks, replaces the
// reconciler's queue with one in its own time, and calls the sync itself.
// Production code does not use them.

// SetClock sets the Sweeper's clock.
func (s *Sweeper) SetClock(now func() time.Time) { s.now = now }

// NewSimSweeper makes a Sweeper for the simulator, which keeps its own
// clock and calls Sweep itself; volumes is the PV informer.
func (p *Provisioner) NewSimSweeper(o SweepOptions, volumes cache.SharedIndexInformer) (*Sweeper, error) {
	o.VolumeEvents = volumes
	return p.NewSweeper(context.Background(), o)
}

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
