package kind

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A private engine's folder holds "owner" (the pid and start time of the
// process that started it) and "holder.pid" (its namespace's holder):
// enough for a later Start to remove an engine whose owner died without
// Stop (a test binary killed by its -timeout, say).

func writeOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, "owner"), []byte(processID(os.Getpid())), 0o600)
}

// processID is "pid starttime": a pid alone could be reused.
func processID(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return ""
	}
	return fmt.Sprintf("%d %s", pid, fields[19]) // field 22 of stat: starttime
}

// CleanStale removes every private engine under os.TempDir() whose owner
// is gone: its processes, namespace, cgroup parent and folder. Start calls
// it before starting a private engine.
func CleanStale(logf func(string, ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "tether-kind-*"))
	for _, dir := range dirs {
		owner, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			continue // not an engine's folder, or one just being made
		}
		fields := strings.Fields(string(owner))
		if len(fields) == 2 {
			if pid, err := strconv.Atoi(fields[0]); err == nil && processID(pid) == string(owner) {
				continue // its owner runs
			}
		}
		logf("removing the stale private docker engine in %s (its owner %q is gone)", dir, owner)
		// Nothing in it needs to stop cleanly: kill it all, dockerd too.
		if pid := readPID(filepath.Join(dir, "holder.pid")); pid > 0 && commOf(pid) == "sleep" {
			if err := killNamespace(pid); err != nil {
				logf("%v", err)
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if pid := readPID(filepath.Join(dir, "dockerd.pid")); pid > 0 && commOf(pid) == "dockerd" {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if err := removeCgroupParent(filepath.Base(dir)); err != nil {
			logf("%v", err)
		}
		for _, m := range mountsUnder(dir) {
			syscall.Unmount(m, syscall.MNT_DETACH)
		}
		if err := os.RemoveAll(dir); err != nil {
			logf("%v", err)
		}
	}
}

func readPID(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// commOf is a process's name, "" when it is gone or a zombie.
func commOf(pid int) string {
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || zombie(string(stat)) {
		return ""
	}
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(comm))
}
