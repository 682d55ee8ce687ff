package cluster

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// hostState is what a real node must leave as it found it.
type hostState struct {
	exists  map[string]bool
	sysctls map[string]string
}

// hostPaths are the places kubelet and containerd write by default.
var hostPaths = []string{"/var/lib/kubelet", "/var/lib/tether-local", "/var/lib/containerd", "/var/lib/cni", "/var/log/pods",
	"/var/log/containers", "/run/containerd", "/run/nri", "/opt/containerd", "/etc/cni/net.d/10-tether.conflist"}

var hostSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "net/ipv4/ip_forward"}

func snapshotHost() hostState {
	s := hostState{exists: map[string]bool{}, sysctls: map[string]string{}}
	for _, p := range hostPaths {
		_, err := os.Lstat(p)
		s.exists[p] = err == nil
	}
	for _, f := range hostSysctls {
		v, _ := os.ReadFile("/proc/sys/" + f)
		s.sysctls[f] = string(v)
	}
	return s
}

// stop ends everything of the node that outlives its three processes
// (stopped before this runs): the containers, found by their cgroups, and
// containerd's shims, found by the node's folder on their command line;
// then the node's cgroups, bridge and folder.
func (n *RealNode) stop(t T) {
	t.Helper()
	for _, p := range []*Process{n.kubelet, n.containerd, n.holder} {
		if p != nil {
			p.Stop(10 * time.Second)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := append(cgroupPids(n.cgroupRoot), pidsNaming(n.Dir)...)
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("node %s: processes %v survive SIGKILL", n.Name, pids)
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond) // let the kernel reap them before looking again
	}
	if err := removeCgroups(n.cgroupRoot); err != nil {
		t.Errorf("node %s: %v", n.Name, err)
	}
	if _, err := net.InterfaceByName(n.bridge); err == nil {
		if out, err := exec.Command("ip", "link", "del", n.bridge).CombinedOutput(); err != nil {
			t.Errorf("node %s: delete bridge %s: %v %s", n.Name, n.bridge, err, out)
		}
	}
	if t.Failed() || os.Getenv("TETHER_KEEP_LOGS") != "" {
		saveNodeLogs(t, n)
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		t.Errorf("node %s: %v", n.Name, err)
	}
}

// guardNode clears a node up if the test binary dies before its clean-up
// runs (a timeout, Ctrl-C): kubelet, containerd and the namespace die with
// it (Pdeathsig), but containerd's shims and the containers would not. A
// watchdog shell gets SIGTERM from the kernel then, and kills what the
// node's cgroups hold and what names its folder, and removes the cgroups,
// the bridge and the folder. On a normal end it is killed quietly.
func guardNode(t T, n *RealNode) {
	t.Helper()
	script := fmt.Sprintf(`trap '
for i in 1 2 3 4 5; do
  for f in $(find /sys/fs/cgroup/memory%[1]s -name cgroup.procs 2>/dev/null); do xargs -r kill -9 < "$f"; done
  pkill -9 -f "$D"; sleep 1
done
find /sys/fs/cgroup/*%[1]s -depth -type d -exec rmdir {} + 2>/dev/null
ip link del %[2]s 2>/dev/null; rm -rf "$D"; exit 0' TERM
while :; do sleep 3600 & wait $!; done`, n.cgroupRoot, n.bridge)
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "D="+n.Dir) // not on its command line: pkill -f would match the guard
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Logf("node %s: no orphan guard: %v", n.Name, err)
		return
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
}

// checkNothingLeft fails the test for anything of the node left on the host.
func checkNothingLeft(t T, n *RealNode, before hostState) {
	t.Helper()
	after := snapshotHost()
	for _, p := range hostPaths {
		if after.exists[p] && !before.exists[p] {
			t.Errorf("node %s left %s on the host", n.Name, p)
		}
	}
	for _, f := range hostSysctls {
		if after.sysctls[f] != before.sysctls[f] {
			t.Errorf("node %s changed the host's %s from %q to %q", n.Name, f, before.sysctls[f], after.sysctls[f])
		}
	}
	if pids := append(cgroupPids(n.cgroupRoot), pidsNaming(n.Dir)...); len(pids) > 0 {
		t.Errorf("node %s left processes %v", n.Name, pids)
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/*" + n.cgroupRoot); len(left) > 0 {
		t.Errorf("node %s left cgroups %v", n.Name, left)
	}
	if _, err := net.InterfaceByName(n.bridge); err == nil {
		t.Errorf("node %s left its bridge %s", n.Name, n.bridge)
	}
	if _, err := os.Stat(n.Dir); err == nil {
		t.Errorf("node %s left its folder %s", n.Name, n.Dir)
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err == nil && bytes.Contains(mounts, []byte(n.Dir)) {
		t.Errorf("node %s left mounts on the host", n.Name)
	}
}

// cgroupPids lists the processes in a cgroup tree (the memory hierarchy
// has every container).
func cgroupPids(root string) []int {
	var pids []int
	for _, h := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified"} {
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// pidsNaming lists the processes whose command line contains s.
func pidsNaming(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// makeCgroups makes the node's cgroup root in every hierarchy (kubelet's
// --cgroup-root must exist); a cpuset gets its parent's CPUs and memory.
func makeCgroups(root string) error {
	hs, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hs {
		if fi, err := os.Lstat(h); err != nil || !fi.IsDir() {
			continue // cpu and cpuacct are links to cpu,cpuacct
		}
		dir := filepath.Join(h, root)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeCgroups removes a cgroup tree, deepest first, in every hierarchy.
func removeCgroups(root string) error {
	tops, _ := filepath.Glob("/sys/fs/cgroup/*" + root)
	var errs []string
	for _, top := range tops {
		var dirs []string
		_ = filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !os.IsNotExist(err) {
				errs = append(errs, fmt.Sprintf("rmdir %s: %v", dirs[i], err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cgroups left: %s", strings.Join(errs, "; "))
	}
	return nil
}

// saveNodeLogs keeps the pods' logs (the node's /var/log/pods) with the
// components' logs, for a failed test.
func saveNodeLogs(t T, n *RealNode) {
	root := os.Getenv("TETHER_ARTIFACTS")
	if root == "" {
		repo, err := RepoRoot()
		if err != nil {
			return
		}
		root = filepath.Join(repo, "_artifacts")
	}
	dst := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"), n.Name+"-pods")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(n.Dir, "log", "pods"))); err != nil {
		t.Logf("node %s: saving pod logs: %v", n.Name, err)
	}
}
