// Package unixsock serves on a unix socket in a folder that the next pod
// of a DaemonSet shares (kubelet's plugin folders on the host), and
// removes the socket file on the way out only if it is still its own.
//
// When a node comes back after being lost, kubelet starts the DaemonSet's
// new pod while it kills the old one: the new driver or registrar makes
// its socket at the same path first, and the old one's clean-up (Go's
// listener unlinks its path on Close) would then remove the new socket.
// kubelet would lose the driver's registration, or the registrar the
// driver, until someone restarted the pod.
package unixsock

import (
	"errors"
	"io/fs"
	"net"
	"os"
)

// Socket is a listening unix socket and the file it made.
type Socket struct {
	net.Listener
	Path string
	made os.FileInfo
}

// Listen serves on path, in place of a socket left there.
func Listen(path string) (*Socket, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false) // Remove does, when it may
	made, err := os.Stat(path)
	if err != nil {
		lis.Close()
		return nil, err
	}
	return &Socket{Listener: lis, Path: path, made: made}, nil
}

// Ours reports whether the file at the path is still the socket made here
// (not gone, not replaced by a newer one's).
func (s *Socket) Ours() bool {
	cur, err := os.Stat(s.Path)
	return err == nil && os.SameFile(cur, s.made)
}

// Remove removes the socket file if it is still this one's.
func (s *Socket) Remove() {
	if s.Ours() {
		_ = os.Remove(s.Path)
	}
}
