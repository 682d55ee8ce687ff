package sim

import (
	"runtime/debug"
	"strings"
	"testing"
)

// MutateSchedules is the length of make mutate's short run: a few seconds.
const MutateSchedules = 200

// Short runs n schedules seeded first, first+1, ... and fails t with the
// first failing schedule's seed and violations. make mutate's build-tagged
// tests in the mutated packages call it, so that a mutant the package's own
// tests let live is still killed when the simulator's invariants catch it.
func Short(t testing.TB, first int64, n int) {
	t.Helper()
	// The simulator allocates much and lives briefly (make sim's GOGC=800).
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	s := Run(first, n)
	if len(s.Failed) > 0 {
		r := s.Failed[0]
		t.Fatalf("simulator: %d violations in %d schedules; seed %d:\n%s", s.Violations, n, r.Seed, strings.Join(r.Violations, "\n"))
	}
}
