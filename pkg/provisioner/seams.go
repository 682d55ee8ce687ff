package provisioner

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
)

// Seams for the deterministic simulator (test/sim), which runs this
// package's own code one step at a time: it sets the sweep's clock and
// calls Sweep itself. Production code does not use them.

// SetClock sets the Sweeper's clock.
func (s *Sweeper) SetClock(now func() time.Time) { s.now = now }

// NewSimSweeper makes a Sweeper for the simulator, which keeps its own
// clock and calls Sweep itself; volumes is the PV informer.
func (p *Provisioner) NewSimSweeper(o SweepOptions, volumes cache.SharedIndexInformer) (*Sweeper, error) {
	o.VolumeEvents = volumes
	return p.NewSweeper(context.Background(), o)
}
