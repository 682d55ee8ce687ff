package kind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stop ends dockerd (which ends its containerd), then every process still
// in the namespace (shims, containers), then the holder, which takes the
// namespace and all its mounts with it; then it removes the cgroup parent
// and the folder. It goes on after an error and returns them all.
func (e *engine) stop(ctx context.Context) error {
	var errs []error
	if e.dockerd != nil && e.dockerd.Process != nil {
		e.dockerd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.dockerdDone:
		case <-time.After(30 * time.Second):
			e.logf("dockerd did not stop in 30 s after SIGTERM: killing it")
			e.dockerd.Process.Kill()
			<-e.dockerdDone
		}
	}
	if e.holder != nil && e.holder.Process != nil {
		if err := killNamespace(e.holderPID()); err != nil {
			errs = append(errs, err)
		}
		e.holder.Process.Kill()
		e.holder.Wait()
	}
	if err := removeCgroupParent(e.cgroupParent); err != nil {
		errs = append(errs, err)
	}
	for _, m := range mountsUnder(e.dir) { // none expected: they were the namespace's
		e.logf("unmounting %s, seen from the host", m)
		if out, err := exec.Command("umount", "-l", m).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("umount %s: %v: %s", m, err, out))
		}
	}
	if err := os.RemoveAll(e.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killNamespace kills every process but the holder in the holder's network
// namespace and waits up to 10 s for them to be gone.
func killNamespace(holder int) error {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", holder))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := pidsInNetns(ns, holder)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v are still in the engine's namespace", pids)
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func pidsInNetns(ns string, except int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == except {
			continue
		}
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && link == ns {
			if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && zombie(string(stat)) {
				continue
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// zombie says whether a /proc/PID/stat line is a zombie's (state Z).
func zombie(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	return i >= 0 && len(stat) > i+2 && stat[i+2] == 'Z'
}

// removeCgroupParent removes name and every folder under it at the root of
// every cgroup hierarchy, deepest first (cgroup folders go with rmdir only),
// killing any process still in them: a container whose shim and dockerd
// died lives on, its cgroup the only trace of it. A folder is busy while a
// process dying in it or a child remains, so it walks again until nothing
// is left or 60 s have passed.
func removeCgroupParent(name string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		left, err := removeCgroupPass(name)
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup parent %s: %d folders left: %w", name, left, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// removeCgroupPass kills and removes what it can of name's folders, deepest
// first, and says how many are left and the last error.
func removeCgroupPass(name string) (int, error) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + name)
	if _, err := os.Stat("/sys/fs/cgroup/" + name); err == nil { // cgroup v2
		roots = append(roots, "/sys/fs/cgroup/"+name)
	}
	left := 0
	var last error
	for _, root := range roots {
		var dirs []string
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, dir := range dirs {
			killCgroup(dir)
			if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
				left++
				last = fmt.Errorf("rmdir %s: %w", dir, err)
			}
		}
	}
	return left, last
}

// killCgroup kills every process in one cgroup folder.
func killCgroup(dir string) {
	data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// mountsUnder lists the host's mount points under dir, deepest first.
func mountsUnder(dir string) []string {
	var out []string
	for _, m := range readMounts() {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			out = append(out, m.point)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}
