package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/tether-csi/tether/internal/version"
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
	// One folder per build mode in the repository's cache, not a new
	// temporary folder per test binary (those were never removed: hundreds
	// of 95 MB race builds piled up in /tmp). Test binaries of several
	// packages build at once, so each writes a file of its own and renames
	// it into place; a process running the previous file keeps it.
	mode := "plain"
	args := []string{"build", "-tags", version.BuildTags}
	if os.Getenv("TETHER_RACE") == "1" {
		// With the race detector (make test sets this): a race fails the
		// test that ran the process (see Process.checkRaces).
		mode, args = "race", append(args, "-race")
	}
	dir := filepath.Join(root, ".cache", "bin", mode)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.Base(strings.TrimSuffix(pkg, "/")))
	tmp, err := os.CreateTemp(dir, ".build-")
	if err != nil {
		t.Fatal(err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command("go", append(args, "-o", tmp.Name(), pkg)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		t.Fatal(err)
	}
	buildCache[pkg] = path
	return path
}
