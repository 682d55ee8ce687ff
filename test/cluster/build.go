package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var (
	buildMu    sync.Mutex
	buildCache = map[string]string{}
)

// BuildBinary builds a main package of this module (for example
// "./cmd/binder") once per test binary and returns the path of the result.
// Tests run our components as real processes with it. TETHER_RACE=1 builds
// it with the race detector.
func BuildBinary(t T, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if path, ok := buildCache[pkg]; ok {
		return path
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tether-bin-")
	if err != nil {
		t.Fatal(err)
	}
	// The folder outlives this test so that later tests reuse the binary; it
	// is small and lives in the system temp folder.
	path := filepath.Join(dir, filepath.Base(strings.TrimSuffix(pkg, "/")))
	args := []string{"build", "-o", path}
	if os.Getenv("TETHER_RACE") == "1" {
		// With the race detector (make test sets this): a race fails the
		// test that ran the process (see Process.checkRaces).
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	buildCache[pkg] = path
	return path
}
