package server

import (
	"context"
	"sync"

	"k8s.io/klog/v2"
)

// Work is a command's work under the lease when it runs in goroutines of
// its own (workers, reconcilers, a sweep): a work function that starts them
// and returns would let RunElected hand the lease back while they still
// call the backend, and a new leader could then make the same calls.
//
// Work.Run makes the work function that RunElected runs. When its context
// ends (the process is told to stop, or the lease is lost):
//  1. Calls refuse new calls at once;
//  2. the calls in progress are waited for; the goroutines' context is
//     still alive, so that a call under way is not cut off half-way (its
//     result, a volume made or deleted, is then recorded);
//  3. the goroutines' context ends, and the goroutines are waited for.
//
// Only then does the work function return, and RunElected hand the lease
// back. RunElected bounds the wait (LeaderOptions.DrainTimeout, and less
// after a lost lease); past it the process must exit without handing the
// lease back. A Work runs once.
type Work struct {
	// Calls gates the calls that must not outlive the lease.
	Calls Calls

	wg  sync.WaitGroup
	mu  sync.Mutex
	ctx context.Context // the goroutines' context, set by Run
}

// Go runs f in a goroutine on the goroutines' context (see Work), and the
// work function returns only after f has. Call it from Run's start.
func (w *Work) Go(f func(ctx context.Context)) {
	w.mu.Lock()
	ctx := w.ctx
	w.mu.Unlock()
	if ctx == nil {
		panic("server.Work: Go called outside Run")
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f(ctx)
	}()
}

// Run returns the work function: it calls start, which starts the
// goroutines with Go, waits for its context to end, and stops as Work
// says. An error from start stops at once and is returned.
func (w *Work) Run(start func(ctx context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		logger := klog.FromContext(ctx)
		goCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		w.mu.Lock()
		w.ctx = goCtx
		w.mu.Unlock()
		// Refuse new calls the moment ctx ends, even while start runs.
		defer context.AfterFunc(ctx, w.Calls.Close)()

		err := start(ctx)
		if err == nil {
			<-ctx.Done()
		}
		w.Calls.Close()
		if n := w.Calls.InProgress(); n > 0 {
			logger.Info("Stopping: waiting for the calls in progress", "calls", n)
		}
		_ = w.Calls.Wait(context.Background()) // RunElected bounds the wait
		cancel()
		w.wg.Wait()
		logger.V(2).Info("Work stopped")
		return err
	}
}
