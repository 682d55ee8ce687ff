package kind

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Snapshot is what running docker and kind could change on the host, as
// sorted lines per kind of thing: Diff compares two.
type Snapshot map[string][]string

// Sysctls are the host-global settings a kubelet in a privileged node
// container would set (the node image guards them), and ip_forward, which
// dockerd sets (in its own namespace only, when private).
var Sysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "net/ipv4/ip_forward"}

// HostPaths are where a docker engine left to its defaults writes.
var HostPaths = []string{"/etc/docker", "/var/lib/docker", "/var/lib/containerd", "/run/docker", "/run/docker.sock",
	"/run/containerd", "/run/runc", "/root/.docker"}

// ProcessMarker is in the command line of every dockerd, containerd, shim
// and runc a private engine runs (its folder's name): processes of those
// names without it are someone else's and not recorded. Every dockerd and
// docker-proxy is.
const ProcessMarker = "tether-kind-"

// TakeSnapshot records the host's network interfaces, iptables rule and
// chain counts, mounts, Sysctls, top-level cgroup folders, HostPaths,
// loaded kernel modules and engine processes (see ProcessMarker). Mounts
// at or under a skip path are left out: someone else's, made meanwhile.
func TakeSnapshot(skip ...string) Snapshot {
	s := Snapshot{}
	if ifaces, err := net.Interfaces(); err == nil {
		for _, i := range ifaces {
			s.add("interface", fmt.Sprintf("%s %s", i.Name, i.Flags))
		}
	} else {
		s.add("interface", "error: "+err.Error())
	}
	for _, tool := range []string{"iptables-save", "ip6tables-save", "iptables-legacy-save", "ip6tables-legacy-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			continue
		}
		out, err := exec.Command(tool).Output()
		if err != nil {
			s.add("iptables", fmt.Sprintf("%s: error %v", tool, err))
			continue
		}
		rules, chains := 0, 0
		for _, line := range strings.Split(string(out), "\n") {
			rules += b2i(strings.HasPrefix(line, "-A "))
			chains += b2i(strings.HasPrefix(line, ":"))
		}
		s.add("iptables", fmt.Sprintf("%s: %d rules, %d chains", tool, rules, chains))
	}
mounts:
	for _, m := range readMounts() {
		for _, p := range skip {
			if p != "" && (m.point == p || strings.HasPrefix(m.point, strings.TrimSuffix(p, "/")+"/")) {
				continue mounts
			}
		}
		s.add("mount", m.point+" "+m.fstype+" "+m.source)
	}
	for _, k := range Sysctls {
		v, err := os.ReadFile("/proc/sys/" + k)
		s.add("sysctl", strings.ReplaceAll(k, "/", ".")+"="+strings.TrimSpace(string(v))+errText(err))
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/*")
	for _, c := range cgroups {
		if st, err := os.Stat(c); err == nil && st.IsDir() {
			s.add("cgroup", c)
		}
	}
	for _, p := range HostPaths {
		entries, err := os.ReadDir(p)
		switch {
		case os.IsNotExist(err):
			if _, err := os.Lstat(p); os.IsNotExist(err) {
				continue // absent: no line
			}
			s.add("path", p)
		case err != nil:
			s.add("path", p) // a file (a socket)
		default:
			for _, e := range entries {
				s.add("path", filepath.Join(p, e.Name()))
			}
			s.add("path", p+"/")
		}
	}
	if data, err := os.ReadFile("/proc/modules"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				s.add("module", f[0])
			}
		}
	}
	for _, p := range engineProcesses() {
		s.add("process", p)
	}
	for _, lines := range s {
		sort.Strings(lines)
	}
	return s
}

func (s Snapshot) add(kind, line string) { s[kind] = append(s[kind], line) }

// Diff names what changed from before to after, one line each ("+" new,
// "-" gone); empty when nothing did.
func Diff(before, after Snapshot) []string {
	kinds := map[string]bool{}
	for k := range before {
		kinds[k] = true
	}
	for k := range after {
		kinds[k] = true
	}
	var out []string
	for k := range kinds {
		was, is := set(before[k]), set(after[k])
		for line := range is {
			if !was[line] {
				out = append(out, fmt.Sprintf("%s + %s", k, line))
			}
		}
		for line := range was {
			if !is[line] {
				out = append(out, fmt.Sprintf("%s - %s", k, line))
			}
		}
	}
	sort.Strings(out)
	return out
}

func set(lines []string) map[string]bool {
	m := map[string]bool{}
	for _, l := range lines {
		m[l] = true
	}
	return m
}

// engineProcesses are "name pid: command line" of every dockerd and
// docker-proxy, and of containerd, containerd-shim* and runc with
// ProcessMarker in their command line.
func engineProcesses() []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		if commOf(pid) == "" {
			continue // a zombie: gone, only not yet reaped
		}
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cmdline := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		mine := strings.Contains(cmdline, ProcessMarker)
		switch {
		case name == "dockerd", name == "docker-proxy",
			(name == "containerd" || strings.HasPrefix(name, "containerd-shim") || name == "runc") && mine:
			out = append(out, fmt.Sprintf("%s %d: %s", name, pid, cmdline))
		}
	}
	return out
}

// mount is one line of /proc/self/mountinfo.
type mount struct{ point, fstype, source string }

func readMounts() []mount {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []mount
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		fields := strings.Fields(line)
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || len(fields) < sep+3 {
			continue
		}
		out = append(out, mount{point: unescapeMount(fields[4]), fstype: fields[sep+1], source: fields[sep+2]})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func errText(err error) string {
	if err != nil {
		return " (" + err.Error() + ")"
	}
	return ""
}
