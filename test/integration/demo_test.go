package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tether-csi/tether/test/cluster"
)

// TestDemo runs `make demo` the way the README's first command does, with
// DEMO_EXIT=1 so that it ends by itself: it must bind every claim and
// leave no process behind (make test's reap step checks that).
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo builds and starts a whole stack")
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "go", "run", "./hack/demo")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DEMO_EXIT=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Every claim is bound") {
		t.Fatalf("demo failed (%v):\n%s", err, out)
	}
	t.Logf("demo output (tail):\n%s", lastLines(string(out), 12))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
