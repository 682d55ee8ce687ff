package integration

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/tether-csi/tether/test/cluster"
)

// TestDemo runs `make demo` as the README's first command does, on the
// tests' tools cache, with DEMO_EXIT=1 so that it ends by itself: its first
// line says what it does, it binds every claim, it prints no goroutine stack
// (controller-runtime's unset logger printed one) and it leaves no process
// behind (make test's reap step checks that).
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo builds and starts a whole stack")
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cluster.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	// hack/tools/build.sh's demo set (kubelet only for real nodes), present
	// so that make demo does not build it here.
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"} {
		if _, err := cluster.Tool(name); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), "make", "demo", "DEMO_EXIT=1", "TOOLS_BIN="+tools)
	cmd.Dir = root
	// A make of its own, as a user's: not a sub-make of make test's (which
	// would print its directory first and take make test's variables).
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == "MAKEFLAGS" || name == "MFLAGS" || name == "MAKELEVEL"
	})
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil || !strings.Contains(out, "Every claim is bound") {
		t.Fatalf("demo failed (%v):\n%s", err, out)
	}
	if !strings.HasPrefix(out, "make demo: ") || !strings.Contains(firstLine(out), "first run builds") {
		t.Errorf("the demo's first line does not say what it does and how long its first build takes: %q", firstLine(out))
	}
	if strings.Contains(out, "goroutine ") {
		t.Errorf("the demo printed a goroutine stack:\n%s", out)
	}
	t.Logf("demo output (tail):\n%s", lastLines(out, 12))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
