// Package benchout writes benchmark figures as JSON beside the tables the
// benches print: _artifacts/bench/<bench>.json holds one object per run
// (settings, times, rates, RSS, API requests), appended run after run, so
// that a script can compare invocations.
package benchout

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/tether-csi/tether/test/cluster"
)

// Run is one run of a bench: who ran, with what settings, and what it
// measured. Figures is free-form (durations in seconds, rates per second,
// sizes in bytes: say so in the key, e.g. "bound_p99_seconds").
type Run struct {
	Bench    string         `json:"bench"`
	Label    string         `json:"label"`
	Started  time.Time      `json:"started"`
	Settings map[string]any `json:"settings,omitempty"`
	Figures  map[string]any `json:"figures"`
	// Machine is filled in by Write: CPUs, the load average at the end.
	Machine map[string]any `json:"machine,omitempty"`
}

// Dir is where the files go: $TETHER_ARTIFACTS/bench, or _artifacts/bench
// in the repository.
func Dir() (string, error) {
	if d := os.Getenv("TETHER_ARTIFACTS"); d != "" {
		return filepath.Join(d, "bench"), nil
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_artifacts", "bench"), nil
}

// Write appends run to <Dir>/<run.Bench>.json, a JSON array of runs, and
// returns the file's path.
func Write(run Run) (string, error) {
	if run.Bench == "" || strings.ContainsAny(run.Bench, `/\`) {
		return "", fmt.Errorf("benchout: bench name %q", run.Bench)
	}
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if run.Machine == nil {
		run.Machine = map[string]any{}
	}
	run.Machine["cpus"] = runtime.NumCPU()
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		run.Machine["loadavg"] = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	path := filepath.Join(dir, run.Bench+".json")
	var runs []json.RawMessage
	if data, err := os.ReadFile(path); err == nil && len(data) > 0 {
		if err := json.Unmarshal(data, &runs); err != nil {
			return "", fmt.Errorf("benchout: %s is not a JSON array of runs: %w", path, err)
		}
	}
	one, err := json.Marshal(run)
	if err != nil {
		return "", err
	}
	runs = append(runs, one)
	out, err := json.MarshalIndent(runs, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(out, '\n'), 0o644)
}
