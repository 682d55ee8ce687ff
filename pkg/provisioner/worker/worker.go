package worker

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Run works queue with workers goroutines until ctx ends, then shuts
// it down. Each key is synced; a failure is logged with the message failed
// (the key under keyName) and retried with the queue's rate limiter, a
// success forgets the key's failures.
func Run(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], workers int,
	keyName, failed string, syncKey func(context.Context, string) error) {
	logger := klog.FromContext(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // the workers stop before the lease may be handed back
	defer queue.ShutDown()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				key, quit := queue.Get()
				if quit {
					return
				}
				if err := syncKey(ctx, key); err != nil {
					logger.Error(err, failed, keyName, key)
					queue.AddRateLimited(key)
				} else {
					queue.Forget(key)
				}
				queue.Done(key)
			}
		}()
	}
	<-ctx.Done()
}
