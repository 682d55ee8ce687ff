package gogc

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr/testr"
)

func TestPercent(t *testing.T) {
	for _, tt := range []struct {
		gogc      string
		set       bool
		want      int
		wantApply bool
	}{
		{"", false, 50, true},
		{"", true, 50, true}, // GOGC= is unset for the runtime too
		{"100", true, 0, false},
		{"off", true, 0, false},
	} {
		got, apply := Percent(50, tt.gogc, tt.set)
		if got != tt.want || apply != tt.wantApply {
			t.Errorf("Percent(50, %q, %v) = %d, %v; want %d, %v", tt.gogc, tt.set, got, apply, tt.want, tt.wantApply)
		}
	}
}

func TestMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	logger := testr.New(t)

	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("AUTOMEMLIMIT", "")
	os.Unsetenv("AUTOMEMLIMIT")
	var limit uint64 = 64 << 20
	want := int64(float64(limit) * MemoryRatio)
	if got := MemoryLimit(t.Context(), logger, memlimit.Limit(limit)); got != want {
		t.Errorf("a 64 MiB limit: MemoryLimit = %d, want %d", got, want)
	}
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Errorf("a 64 MiB limit: the runtime's limit is %d, want %d", got, want)
	}

	debug.SetMemoryLimit(prev)
	if got := MemoryLimit(t.Context(), logger, func() (uint64, error) { return 0, memlimit.ErrNoLimit }); got != math.MaxInt64 {
		t.Errorf("no limit: MemoryLimit = %d, want none (%d)", got, int64(math.MaxInt64))
	}

	// The environment's GOMEMLIMIT wins (the runtime applied it at start).
	debug.SetMemoryLimit(prev)
	t.Setenv("GOMEMLIMIT", "100MiB")
	if got := MemoryLimit(t.Context(), logger, memlimit.Limit(limit)); got != prev {
		t.Errorf("GOMEMLIMIT set: MemoryLimit = %d, want the runtime's %d unchanged", got, prev)
	}
}
