package kind

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// dialInNetns dials addr from inside the network namespace of process pid:
// the socket is made on a thread that joined that namespace and then
// returned to its own; a socket keeps the namespace it was made in.
func dialInNetns(ctx context.Context, pid int, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer own.Close()
		target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		// Serially, on this thread: no fallback racing on other threads.
		dialer := net.Dialer{FallbackDelay: -1}
		conn, err := dialer.DialContext(ctx, network, addr)
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			// This thread stays in the wrong namespace: keep it locked, so
			// that it ends with this goroutine and nothing else runs on it.
			ch <- result{conn: conn, err: err}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{conn: conn, err: err}
	}()
	r := <-ch
	return r.conn, r.err
}
