//go:build mutate

package scope_test

import (
	"testing"

	"github.com/tether-csi/tether/test/sim"
)

// TestMutateSim is make mutate's short simulator run: a mutant of this
// package that the unit tests miss is killed if it breaks an invariant in
// the first schedules (the simulator's caches keep what the scope's
// Keepers keep).
func TestMutateSim(t *testing.T) {
	sim.Short(t, 1, sim.MutateSchedules)
}
