package driver

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// mountEntry is one line of /proc/self/mountinfo, the fields we use.
type mountEntry struct {
	majMin string // device, "major:minor"
	root   string // the mounted folder, as a path inside its filesystem
	point  string // where it is mounted
}

// mountinfoPath is a variable for tests.
var mountinfoPath = "/proc/self/mountinfo"

// readMounts parses the mount table of the driver's mount namespace.
func readMounts() ([]mountEntry, error) {
	f, err := os.Open(mountinfoPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// id parent major:minor root mount-point options ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			return nil, fmt.Errorf("bad line in %s: %q", mountinfoPath, sc.Text())
		}
		out = append(out, mountEntry{majMin: fields[2], root: unescapeMount(fields[3]), point: unescapeMount(fields[4])})
	}
	return out, sc.Err()
}

// unescapeMount undoes the kernel's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// canonical resolves symlinks in path as far as it exists, so that it can
// be compared with mount points, which the kernel reports resolved.
func canonical(path string) string {
	path = filepath.Clean(path)
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return path
}

// isMountPoint reports whether something is mounted at path.
func isMountPoint(path string) (bool, error) {
	mounts, err := readMounts()
	if err != nil {
		return false, err
	}
	path = canonical(path)
	for _, m := range mounts {
		if m.point == path {
			return true, nil
		}
	}
	return false, nil
}

// mountsOf returns where folder (or a folder inside it) is bind-mounted,
// found as the mounts of folder's device whose root is folder's path inside
// that filesystem.
func mountsOf(folder string) ([]string, error) {
	mounts, err := readMounts()
	if err != nil {
		return nil, err
	}
	folder = canonical(folder)
	// The mount holding folder is the one with the longest mount point
	// that contains it.
	var holder *mountEntry
	for i := range mounts {
		m := &mounts[i]
		if within(folder, m.point) && (holder == nil || len(m.point) >= len(holder.point)) {
			holder = m
		}
	}
	if holder == nil {
		return nil, fmt.Errorf("no mount holds %s", folder)
	}
	rel, err := filepath.Rel(holder.point, folder)
	if err != nil {
		return nil, err
	}
	inFS := filepath.Join(holder.root, rel)
	var out []string
	for _, m := range mounts {
		if m.majMin == holder.majMin && m.point != holder.point && within(m.root, inFS) {
			out = append(out, m.point)
		}
	}
	return out, nil
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// bindMount mounts source at target, read-only if asked.
func bindMount(source, target string, readOnly bool) error {
	if readOnly {
		return bindReadOnly(source, target)
	}
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return mountError("bind-mounting "+source+" at "+target, err)
	}
	return nil
}

// bindReadOnly mounts source at target read-only, in every mount namespace
// the target propagates to: kubelet's and the container runtime's, which
// make the pod's mount from it. A remount after the bind would make only
// the driver's own copy read-only, since a mount's flags do not propagate;
// so the copy is made read-only while detached (open_tree, mount_setattr)
// and then attached (move_mount), and every propagated copy is read-only
// from its start. A kernel without that API (before Linux 5.12) gets the
// bind and the remount, read-only in the driver's namespace only.
func bindReadOnly(source, target string) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if errors.Is(err, unix.ENOSYS) {
		return bindThenRemount(source, target)
	}
	if err != nil {
		return mountError("cloning the mount of "+source, err)
	}
	defer unix.Close(fd)
	err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	if errors.Is(err, unix.ENOSYS) {
		return bindThenRemount(source, target)
	}
	if err != nil {
		return mountError("making the mount of "+source+" read-only", err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return mountError("mounting "+source+" read-only at "+target, err)
	}
	return nil
}

func bindThenRemount(source, target string) error {
	if err := bindMount(source, target, false); err != nil {
		return err
	}
	if err := unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		_ = unix.Unmount(target, 0)
		return mountError("remounting "+target+" read-only", err)
	}
	return nil
}

// mountError explains a refused mount, which means the driver lacks
// CAP_SYS_ADMIN (a container that is not privileged).
func mountError(what string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%s: %w (mounting needs root with CAP_SYS_ADMIN: run the driver privileged)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// isReadOnlyMount reports whether the mount at path is read-only.
func isReadOnlyMount(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false, err
	}
	return st.Flags&unix.ST_RDONLY != 0, nil
}

// sameFolder reports whether a and b are the same folder (as a bind mount
// and its source are).
func sameFolder(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}

// unmountAll unmounts everything stacked at target. It returns nil when
// nothing is (or remains) mounted there, including when target is missing.
func unmountAll(target string) error {
	for range 16 {
		mounted, err := isMountPoint(target)
		if err != nil {
			return err
		}
		if !mounted {
			return nil
		}
		if err := unix.Unmount(target, 0); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return mountError("unmounting "+target, err)
		}
	}
	return fmt.Errorf("%s is still mounted after 16 unmounts", target)
}
