package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestCalls(t *testing.T) {
	var c Calls
	for range 2 {
		if !c.Enter() {
			t.Fatal("an open Calls refused a call")
		}
	}
	if got := c.InProgress(); got != 2 {
		t.Fatalf("InProgress = %d, want 2", got)
	}
	c.Close()
	if c.Enter() {
		t.Fatal("a closed Calls let a call in")
	}
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := c.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with calls in progress = %v, want the context's deadline", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- c.Wait(t.Context()) }()
	c.Leave()
	select {
	case err := <-waited:
		t.Fatalf("Wait returned (%v) with a call still in progress", err)
	case <-time.After(20 * time.Millisecond):
	}
	c.Leave()
	if err := receive(t, "Wait to return", waited); err != nil {
		t.Errorf("Wait = %v, want nil", err)
	}
	if err := c.Wait(t.Context()); err != nil {
		t.Errorf("Wait with nothing in progress = %v", err)
	}
}

// blockingWork is a work function's part as a provisioner's: a worker in a
// backend call that lasts until proceed is closed, and a worker that runs
// until its context ends.
type blockingWork struct {
	work          Work
	inCall        chan struct{} // closed once the call is under way
	proceed       chan struct{} // ends the call
	callCutOff    atomic.Bool   // the goroutines' context ended during the call
	workerStopped atomic.Bool
}

func newBlockingWork() *blockingWork {
	return &blockingWork{inCall: make(chan struct{}), proceed: make(chan struct{})}
}

func (b *blockingWork) run() func(context.Context) error {
	return b.work.Run(func(context.Context) error {
		b.work.Go(func(ctx context.Context) {
			if !b.work.Calls.Enter() {
				return
			}
			defer b.work.Calls.Leave()
			close(b.inCall)
			<-b.proceed
			b.callCutOff.Store(ctx.Err() != nil)
		})
		b.work.Go(func(ctx context.Context) {
			<-ctx.Done()
			b.workerStopped.Store(true)
		})
		return nil
	})
}

// Defect 8 of issue 24: the provisioner's work function started the
// library, the reconciler and the sweep in goroutines and returned when its
// context ended, so the lease was handed back while a CreateVolume or
// DeleteVolume was still running, and a new leader could start the same
// call. The lease must stay held (and renewed) until the work's calls and
// goroutines are over; new calls are refused at once.
func TestLeaseHeldUntilWorkStops(t *testing.T) {
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b := newBlockingWork()
	returned := make(chan error, 1)
	go func() { returned <- RunElected(ctx, client, testLeaderOptions("me"), &Health{}, b.run()) }()
	receive(t, "the call to start", b.inCall)
	if got := holder(t, client); got != "me" {
		t.Fatalf("lease holder while leading = %q, want me", got)
	}
	cancel() // SIGTERM
	waitFor(t, "new calls to be refused", 5*time.Second, b.work.Calls.Closed)
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-returned:
			t.Fatalf("RunElected returned (%v) while a call was still in progress", err)
		default:
		}
		if got := holder(t, client); got != "me" {
			t.Fatalf("lease holder %q while a call was still in progress, want me", got)
		}
	}
	if b.workerStopped.Load() {
		t.Error("the workers' context ended before the call in progress was over")
	}
	close(b.proceed)
	if err := receive(t, "RunElected to return", returned); err != nil {
		t.Errorf("RunElected = %v, want nil", err)
	}
	if b.callCutOff.Load() {
		t.Error("the call in progress had its context cut off")
	}
	if !b.workerStopped.Load() {
		t.Error("RunElected returned before the workers stopped")
	}
	if got := holder(t, client); got != "" {
		t.Errorf("lease holder after the work stopped = %q, want it handed back", got)
	}
}

// A lost lease (renewals fail): new calls are refused at once, and
// RunElected returns once the work is over, or with ErrWorkNotStopped once
// LeaseDuration - RenewDeadline has passed, without waiting any longer.
func TestLeaseLostStopsWork(t *testing.T) {
	for _, tt := range []struct {
		name       string
		callEnds   bool
		wantErr    error
		wantWithin time.Duration
	}{
		{name: "the call ends", callEnds: true, wantWithin: 5 * time.Second},
		// testLeaderOptions: 3 s lease, 1 s renew deadline: 2 s bound.
		{name: "the call hangs", wantErr: ErrWorkNotStopped, wantWithin: 5 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			var unreachable atomic.Bool
			client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				if unreachable.Load() {
					return true, nil, errors.New("API server unreachable")
				}
				return false, nil, nil
			})
			b := newBlockingWork()
			defer close(b.proceed)
			returned := make(chan error, 1)
			go func() {
				returned <- RunElected(t.Context(), client, testLeaderOptions("me"), &Health{}, b.run())
			}()
			receive(t, "the call to start", b.inCall)
			unreachable.Store(true)
			waitFor(t, "new calls to be refused", 10*time.Second, b.work.Calls.Closed)
			lost := time.Now()
			if tt.callEnds {
				select {
				case err := <-returned:
					t.Fatalf("RunElected returned (%v) while a call was still in progress", err)
				case <-time.After(100 * time.Millisecond):
				}
				b.proceed <- struct{}{}
			}
			err := receive(t, "RunElected to return", returned)
			if took := time.Since(lost); took > tt.wantWithin {
				t.Errorf("RunElected returned %v after the loss, want within %v", took, tt.wantWithin)
			}
			if err == nil {
				t.Fatal("RunElected = nil after losing the lease, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("RunElected = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && errors.Is(err, ErrWorkNotStopped) {
				t.Errorf("RunElected = %v, though the work stopped", err)
			}
		})
	}
}

// On a signal, work that outlives DrainTimeout makes RunElected stop
// renewing and return ErrWorkNotStopped, leaving the lease to expire: it is
// never handed back while the work may still run.
func TestDrainTimeoutLeavesLeaseToExpire(t *testing.T) {
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b := newBlockingWork()
	defer close(b.proceed)
	o := testLeaderOptions("me")
	o.DrainTimeout = 300 * time.Millisecond
	returned := make(chan error, 1)
	go func() { returned <- RunElected(ctx, client, o, &Health{}, b.run()) }()
	receive(t, "the call to start", b.inCall)
	cancel()
	if err := receive(t, "RunElected to return", returned); !errors.Is(err, ErrWorkNotStopped) {
		t.Errorf("RunElected = %v, want %v", err, ErrWorkNotStopped)
	}
	if got := holder(t, client); got != "me" {
		t.Errorf("lease holder = %q, want me (left to expire, not handed back)", got)
	}
}

// Without leader election the same bound applies.
func TestDrainTimeoutWithoutElection(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	b := newBlockingWork()
	defer close(b.proceed)
	returned := make(chan error, 1)
	go func() {
		returned <- RunElected(ctx, nil, LeaderOptions{DrainTimeout: 200 * time.Millisecond}, &Health{}, b.run())
	}()
	receive(t, "the call to start", b.inCall)
	cancel()
	if err := receive(t, "RunElected to return", returned); !errors.Is(err, ErrWorkNotStopped) {
		t.Errorf("RunElected = %v, want %v", err, ErrWorkNotStopped)
	}
}
