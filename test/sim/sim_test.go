package sim

import (
	"flag"
	"fmt"
	"strings"
	"testing"
)

var (
	schedules = flag.Int("sim.schedules", defaultSchedules, "schedules to run (10,000 by default; 300 under the race detector)")
	firstSeed = flag.Int64("sim.seed", 1, "seed of the first schedule")
)

// TestSim runs schedules seeded from -sim.seed on; a violation fails the
// test with the seed and the schedule's trace.
func TestSim(t *testing.T) {
	s := Run(*firstSeed, *schedules)
	for i, r := range s.Failed {
		if i == 0 {
			t.Errorf("seed %d: %d violations:\n%s\ntrace (make sim SIM_SEED=%d SIM_SCHEDULES=1):\n%s",
				r.Seed, len(r.Violations), strings.Join(r.Violations, "\n"), r.Seed, strings.Join(r.Trace, "\n"))
		} else {
			t.Errorf("seed %d: %d violations:\n%s", r.Seed, len(r.Violations), strings.Join(r.Violations, "\n"))
		}
	}
	for _, k := range s.KindOrder {
		t.Logf("kind %q: %d schedules, first at seed %d", k, s.Kinds[k].Schedules, s.Kinds[k].FirstSeed)
	}
	fmt.Printf("sim: %d schedules, %d steps, %d invariant violations\n", *schedules, s.Steps, s.Violations)
}
