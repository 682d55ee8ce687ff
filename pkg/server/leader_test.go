package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func testLeaderOptions(identity string) LeaderOptions {
	return LeaderOptions{Enabled: true, Namespace: "ns", Name: "lease", Identity: identity,
		LeaseDuration: 3 * time.Second, RenewDeadline: time.Second, RetryPeriod: 50 * time.Millisecond}
}

// holder is the lease's holder, "" when it is free or absent.
func holder(t *testing.T, client *fake.Clientset) string {
	t.Helper()
	lease, err := client.CoordinationV1().Leases("ns").Get(context.Background(), "lease", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func receive[V any](t *testing.T, what string, ch <-chan V) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// Defect 6: the lease must stay ours, and RunElected must not return, until
// the work guarded by the lease has returned.
func TestRunElectedWaitsForRun(t *testing.T) {
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started, draining, proceed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	errDrained := errors.New("drained")
	returned := make(chan error, 1)
	go func() {
		returned <- RunElected(ctx, client, testLeaderOptions("me"), &Health{}, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			close(draining)
			<-proceed // the drain takes as long as the test wants
			return errDrained
		})
	}()
	receive(t, "run to start", started)
	if got := holder(t, client); got != "me" {
		t.Fatalf("lease holder while leading = %q, want me", got)
	}
	cancel()
	receive(t, "run's context to end", draining)
	// For several retry periods: the lease still names us and is renewed,
	// and RunElected waits.
	renewed := func() time.Time {
		lease, err := client.CoordinationV1().Leases("ns").Get(context.Background(), "lease", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return lease.Spec.RenewTime.Time
	}
	first := renewed()
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-returned:
			t.Fatalf("RunElected returned (%v) while run was still draining", err)
		default:
		}
		if got := holder(t, client); got != "me" {
			t.Fatalf("lease holder %q while run was still draining, want me", got)
		}
	}
	if !renewed().After(first) {
		t.Errorf("the lease was not renewed while run was draining")
	}
	close(proceed)
	if err := receive(t, "RunElected to return", returned); !errors.Is(err, errDrained) {
		t.Errorf("RunElected = %v, want run's error %v", err, errDrained)
	}
	if got := holder(t, client); got != "" {
		t.Errorf("lease holder after RunElected returned = %q, want it handed back", got)
	}
}

// Standing by when ctx ends: run never starts, and RunElected returns nil.
func TestRunElectedStandingBy(t *testing.T) {
	now := metav1.NewMicroTime(time.Now())
	client := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	})
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	ran := make(chan struct{}, 1)
	go func() {
		returned <- RunElected(ctx, client, testLeaderOptions("me"), &Health{}, func(context.Context) error {
			ran <- struct{}{}
			return nil
		})
	}()
	// Let it try the lease a few times.
	waitFor(t, "attempts on the lease", 10*time.Second, func() bool {
		n := 0
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "leases" && a.GetVerb() == "get" {
				n++
			}
		}
		return n >= 3
	})
	cancel()
	if err := receive(t, "RunElected to return", returned); err != nil {
		t.Errorf("RunElected = %v, want nil", err)
	}
	select {
	case <-ran:
		t.Error("run ran without the lease")
	default:
	}
	if got := holder(t, client); got != "other" {
		t.Errorf("lease holder = %q, want other", got)
	}
}

// Losing the lease ends run's context; RunElected reports the loss once run
// has returned.
func TestRunElectedLeaseLost(t *testing.T) {
	client := fake.NewClientset()
	var unreachable atomic.Bool
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if unreachable.Load() {
			return true, nil, errors.New("API server unreachable")
		}
		return false, nil, nil
	})
	started, runDone := make(chan struct{}), make(chan struct{})
	returned := make(chan error, 1)
	go func() {
		returned <- RunElected(context.Background(), client, testLeaderOptions("me"), &Health{}, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			close(runDone)
			return nil
		})
	}()
	receive(t, "run to start", started)
	unreachable.Store(true)
	err := receive(t, "RunElected to return", returned)
	select {
	case <-runDone:
	default:
		t.Error("RunElected returned before run")
	}
	if err == nil {
		t.Error("RunElected = nil after losing the lease, want an error")
	}
}

// run returning by itself ends leadership: RunElected returns its error and
// hands the lease back.
func TestRunElectedRunReturns(t *testing.T) {
	client := fake.NewClientset()
	errFailed := errors.New("caches did not sync")
	err := RunElected(context.Background(), client, testLeaderOptions("me"), &Health{}, func(context.Context) error {
		return errFailed
	})
	if !errors.Is(err, errFailed) {
		t.Errorf("RunElected = %v, want %v", err, errFailed)
	}
	if got := holder(t, client); got != "" {
		t.Errorf("lease holder = %q, want it handed back", got)
	}
}

func TestRunElectedDisabled(t *testing.T) {
	errFailed := errors.New("failed")
	h := &Health{}
	err := RunElected(context.Background(), nil, LeaderOptions{}, h, func(context.Context) error { return errFailed })
	if !errors.Is(err, errFailed) {
		t.Errorf("RunElected = %v, want %v", err, errFailed)
	}
}
