package driver

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// copyTree copies the folder src to dst (which may exist, empty): folders,
// regular files (reflinked where the file system can), symbolic links,
// with their modes and owners, so that a restored volume is what its pods
// wrote (an fsGroup's group included). Sockets, pipes and devices are
// skipped with a log line: a folder volume has no use for them.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil && !os.IsExist(err) {
				return err
			}
		case mode.IsRegular():
			if err := copyFile(path, target); err != nil {
				return err
			}
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		default:
			klog.InfoS("Not copying a special file into a snapshot or a restored volume", "path", path, "mode", mode.String())
			return nil
		}
		return copyOwnerAndMode(info, target)
	})
}

// copyFile copies one regular file: a reflink (FICLONE) when the file
// system shares blocks, else its bytes (Go uses copy_file_range).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd())); err != nil {
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return fmt.Errorf("copying %s: %w", src, err)
		}
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyOwnerAndMode gives target the owner and mode of info (for a link,
// its owner only).
func copyOwnerAndMode(info fs.FileInfo, target string) error {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil && !os.IsPermission(err) {
			return err
		}
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	return os.Chmod(target, info.Mode().Perm()|info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
}
