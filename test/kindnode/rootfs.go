package kindnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// rootfs is a Debian root filesystem made by mmdebstrap from the
// machine's apt sources.
type rootfs struct {
	// Name names the cached tar (<Name>-<key>.tar).
	Name string
	// Packages are installed on top of the minbase variant.
	Packages []string
	// Hooks are mmdebstrap customize hooks ("$1" is the root).
	Hooks []string
}

// nodeRootfs is the node's system: systemd as init, Debian's containerd,
// runc and CNI plugins, and the tools kubelet and kube-proxy call.
var nodeRootfs = rootfs{
	Name: "node-rootfs",
	Packages: []string{"systemd", "systemd-sysv", "dbus", "containerd", "runc", "containernetworking-plugins",
		"iptables", "conntrack", "iproute2", "ethtool", "kmod", "libseccomp2", "ca-certificates", "procps",
		"mount", "util-linux", "socat", "bash"},
	// As kind's base image: no unit starts that a container cannot run
	// (getty, udev, timers, binfmt), journald does not read the host's
	// kernel log.
	Hooks: []string{
		`rm -f "$1"/etc/systemd/system/*.wants/* "$1"/usr/lib/systemd/system/multi-user.target.wants/* "$1"/usr/lib/systemd/system/local-fs.target.wants/* "$1"/usr/lib/systemd/system/sockets.target.wants/*udev* "$1"/usr/lib/systemd/system/sockets.target.wants/*initctl* "$1"/usr/lib/systemd/system/basic.target.wants/* "$1"/usr/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service`,
		`ln -sf /dev/null "$1"/etc/systemd/system/systemd-binfmt.service`,
		`echo ReadKMsg=no >> "$1"/etc/systemd/journald.conf`,
		`rm -rf "$1"/var/lib/systemd/deb-systemd-helper-enabled`,
	},
}

// imageRootfs is the control-plane images' base: glibc for the
// Kubernetes programs and iptables and conntrack for kube-proxy.
var imageRootfs = rootfs{Name: "image-rootfs", Packages: []string{"iptables", "conntrack"}}

// dpkgExcludes leave out what no one reads in a node.
var dpkgExcludes = []string{"/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*"}

// args are mmdebstrap's arguments for r, writing to out.
func (r rootfs) args(out string) []string {
	a := []string{"--quiet", "--variant=minbase", "--include=" + strings.Join(r.Packages, ",")}
	for _, x := range dpkgExcludes {
		a = append(a, "--dpkgopt=path-exclude="+x)
	}
	for _, h := range r.Hooks {
		a = append(a, "--customize-hook="+h)
	}
	return append(a, Suite, out)
}

// Suite is the Debian release the node runs.
const Suite = "bookworm"

// build returns the cached tar of r, making it if absent. The key covers
// mmdebstrap's arguments and the apt sources (a snapshot mirror gives the
// same packages every time); SOURCE_DATE_EPOCH makes mmdebstrap's output
// reproducible.
func (r rootfs) build(ctx context.Context, o Options) (string, error) {
	sources, err := aptSources()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q\n%s\n%d\n", r.args(""), sources, o.Epoch.Unix())
	out := filepath.Join(o.Cache, fmt.Sprintf("%s-%s.tar", r.Name, hex.EncodeToString(h.Sum(nil))[:16]))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", fmt.Errorf("kind node image: mmdebstrap is not installed (apt-get install mmdebstrap)")
	}
	o.logf("building %s with mmdebstrap (%s, %d packages; under a minute)", r.Name, Suite, len(r.Packages))
	tmp := strings.TrimSuffix(out, ".tar") + ".tmp.tar" // mmdebstrap's format follows the name
	cmd := exec.CommandContext(ctx, "mmdebstrap", r.args(tmp)...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("SOURCE_DATE_EPOCH=%d", o.Epoch.Unix()))
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("mmdebstrap %s: %w\n%s", r.Name, err, b)
	}
	return out, os.Rename(tmp, out)
}

// aptSources is the machine's apt source configuration, which decides
// what mmdebstrap installs.
func aptSources() (string, error) {
	var b strings.Builder
	for _, glob := range []string{"/etc/apt/sources.list", "/etc/apt/sources.list.d/*.list", "/etc/apt/sources.list.d/*.sources"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "%s\n%s\n", f, data)
		}
	}
	return b.String(), nil
}
