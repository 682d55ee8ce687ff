package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// errFatal unwinds run after a fatal error; main then cleans up.
var errFatal = errors.New("fatal")

// runner gives the demo what test/cluster needs of a test: clean-ups run
// at the end, in reverse order, whatever the end is (success, failure or
// Ctrl-C).
type runner struct {
	ctx      context.Context
	stop     context.CancelFunc
	dir      string
	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

func newRunner() *runner {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	dir, err := os.MkdirTemp("", "tether-demo-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return &runner{ctx: ctx, stop: stop, dir: dir}
}

func (r *runner) Context() context.Context { return r.ctx }
func (r *runner) Helper()                  {}
func (r *runner) Name() string             { return "demo" }

func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *runner) TempDir() string {
	d, err := os.MkdirTemp(r.dir, "")
	if err != nil {
		r.Fatal(err)
	}
	return d
}

func (r *runner) Logf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func (r *runner) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", args...)
}

func (r *runner) Fatal(args ...any) {
	r.Errorf("%s", fmt.Sprint(args...))
	panic(errFatal)
}

func (r *runner) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(errFatal)
}

func (r *runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// cleanUp runs the clean-ups, newest first, and removes the demo's folder.
func (r *runner) cleanUp() {
	r.stop()
	r.mu.Lock()
	fns := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
	os.RemoveAll(r.dir)
}
