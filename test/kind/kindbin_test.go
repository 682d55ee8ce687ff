package kind

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// KindBinary builds the pinned kind into an empty folder, and that kind
// talks to the private engine (kind get clusters, through Command).
func TestKindBinary(t *testing.T) {
	needKind(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	want := pinned(t, filepath.Join(root, "hack", "tools", "versions.env"), "KIND_VERSION")
	start := time.Now()
	kind, err := KindBinary(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING kind build: %v", time.Since(start).Round(time.Millisecond))
	out, err := exec.Command(kind, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "kind "+want+" ") {
		t.Fatalf("kind version: %q, %v; want kind %s", out, err, want)
	}
	if again, err := KindBinary(ctx, filepath.Dir(kind)); err != nil || again != kind {
		t.Errorf("KindBinary again: %q, %v; want %q", again, err, kind)
	}

	d := startPrivate(t, ctx)
	defer d.Stop(context.Background())
	out, err = d.Command(ctx, kind, "get", "clusters").CombinedOutput()
	if err != nil {
		t.Fatalf("kind get clusters: %v: %s", err, out)
	}
	t.Logf("kind get clusters against the private engine: %s", strings.TrimSpace(string(out)))
}

// pinned reads KEY=VALUE from an env file.
func pinned(t *testing.T, path, key string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+"="); ok {
			return v
		}
	}
	t.Fatalf("%s does not set %s", path, key)
	return ""
}
