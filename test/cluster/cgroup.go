package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// MemoryCgroup makes a memory cgroup limited to limit bytes, as a
// container's resources.limits.memory makes one, removed when the test
// ends, and returns its cgroup.procs file: a process written there runs
// under the limit (InCgroup). cgroup v2 (memory.max) or v1
// (memory.limit_in_bytes), whichever the machine mounts. It skips the test
// where neither can be made (not root, no memory controller).
func MemoryCgroup(t testing.TB, limit int64) string {
	t.Helper()
	var dir, file string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dir, file = "/sys/fs/cgroup", "memory.max"
		if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err != nil || !strings.Contains(string(b), "memory") {
			t.Skipf("cgroup v2 without the memory controller for children")
		}
	} else {
		dir, file = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
	}
	path, err := os.MkdirTemp(dir, "tether-test-")
	if err != nil {
		t.Skipf("no memory cgroup can be made here: %v", err)
	}
	t.Cleanup(func() {
		// Its processes have been killed by then (Process's cleanup ran
		// first: cleanups run last-registered first).
		if err := os.Remove(path); err != nil {
			t.Logf("removing the cgroup %s: %v", path, err)
		}
	})
	if err := os.WriteFile(filepath.Join(path, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatalf("limiting the cgroup %s: %v", path, err)
	}
	return filepath.Join(path, "cgroup.procs")
}

// InCgroup is the command line that runs path with args in the cgroup of
// procs (MemoryCgroup's): a shell that moves itself there, then execs.
func InCgroup(procs, path string, args ...string) (string, []string) {
	return "/bin/sh", append([]string{"-c", fmt.Sprintf(`echo $$ > %q && exec "$@"`, procs), "sh", path}, args...)
}
