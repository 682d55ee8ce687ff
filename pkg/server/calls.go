package server

import (
	"context"
	"sync"
)

// Calls counts the calls in progress that must not outlive this process's
// leadership (a provisioner's CreateVolume and DeleteVolume, or its
// Provision and Delete), and refuses new ones once it is closed. Work
// closes it at once when the lease is lost or the process is told to
// stop, and waits for the calls under way before the lease is handed back.
//
// A call site does:
//
//	if !calls.Enter() {
//		return errStopping // not started: another leader will
//	}
//	defer calls.Leave()
//
// The zero value is open, with no call in progress.
type Calls struct {
	mu      sync.Mutex
	n       int
	closed  bool
	waiters []chan struct{} // closed when n drops to 0
}

// Enter counts a call in and reports true, or reports false, counting
// nothing, once Close was called: the call must then not start.
func (c *Calls) Enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.n++
	return true
}

// Leave counts out a call that Enter let in.
func (c *Calls) Leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		panic("server.Calls: Leave without Enter")
	}
	c.n--
	if c.n == 0 {
		for _, w := range c.waiters {
			close(w)
		}
		c.waiters = nil
	}
}

// Close makes Enter refuse every call from now on. Calls already in
// progress go on.
func (c *Calls) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
}

// Closed reports whether Close was called.
func (c *Calls) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// InProgress is the number of calls in progress.
func (c *Calls) InProgress() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Wait returns nil once no call is in progress, or ctx's error if ctx ends
// first. Without Close, new calls may start again after it returns.
func (c *Calls) Wait(ctx context.Context) error {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return nil
	}
	idle := make(chan struct{})
	c.waiters = append(c.waiters, idle)
	c.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
