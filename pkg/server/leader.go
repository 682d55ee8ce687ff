package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// LeaderFlagNames name the leader-election flags, which differ between
// kube-controller-manager (--leader-elect…) and external-provisioner
// (--leader-election…). An empty name registers no flag.
type LeaderFlagNames struct {
	Enable, LeaseDuration, RenewDeadline, RetryPeriod, Namespace, Name, Labels string
}

// KCMLeaderFlags are kube-controller-manager's names.
var KCMLeaderFlags = LeaderFlagNames{
	Enable: "leader-elect", LeaseDuration: "leader-elect-lease-duration",
	RenewDeadline: "leader-elect-renew-deadline", RetryPeriod: "leader-elect-retry-period",
	Namespace: "leader-elect-resource-namespace", Name: "leader-elect-resource-name",
}

// EPLeaderFlags are external-provisioner's names (its lease is named after
// the driver, so it has no name flag).
var EPLeaderFlags = LeaderFlagNames{
	Enable: "leader-election", LeaseDuration: "leader-election-lease-duration",
	RenewDeadline: "leader-election-renew-deadline", RetryPeriod: "leader-election-retry-period",
	Namespace: "leader-election-namespace", Labels: "leader-election-labels",
}

// LeaderOptions configure leader election on a coordination.k8s.io Lease.
type LeaderOptions struct {
	Enabled                                   bool
	Namespace, Name                           string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Identity defaults to the host name plus a random suffix.
	Identity string
	// Labels are put on the Lease each time this process takes or renews
	// it (client-go's LeaseLock adds them to the labels it finds).
	Labels LeaseLabels
	// DrainTimeout bounds how long the work may take to stop once its
	// context ended on a signal; past it RunElected stops renewing and
	// returns ErrWorkNotStopped without handing the lease back, and the
	// process should exit. 0 waits as long as it takes. After a lost lease
	// the bound is also at most LeaseDuration - RenewDeadline (see
	// RunElected).
	DrainTimeout time.Duration
	// Status, if set, is the leader status gauge (NewLeaderStatus).
	Status *prometheus.GaugeVec
}

// DefaultDrainTimeout leaves a CSI call under way (external-provisioner's
// --timeout is 10 s) time to end, within a pod's default grace period of
// 30 s.
const DefaultDrainTimeout = 20 * time.Second

// DefaultLeaderOptions are client-go's usual timings.
func DefaultLeaderOptions(name string, enabled bool) LeaderOptions {
	return LeaderOptions{Enabled: enabled, Name: name, LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second, DrainTimeout: DefaultDrainTimeout}
}

// ErrWorkNotStopped is RunElected's error when the work did not stop within
// its bound: the lease was not handed back (it expires by itself), and the
// process should exit, which ends the work.
var ErrWorkNotStopped = errors.New("the work did not stop in time")

// AddFlags registers the flags under the given names.
func (o *LeaderOptions) AddFlags(fs *flag.FlagSet, n LeaderFlagNames) {
	fs.BoolVar(&o.Enabled, n.Enable, o.Enabled, "Elect a leader on a Lease before doing any work, so that replicas can stand by.")
	fs.DurationVar(&o.LeaseDuration, n.LeaseDuration, o.LeaseDuration, "How long a non-leader waits after the last renewal before taking the lease.")
	fs.DurationVar(&o.RenewDeadline, n.RenewDeadline, o.RenewDeadline, "How long the leader keeps trying to renew before it gives up leadership.")
	fs.DurationVar(&o.RetryPeriod, n.RetryPeriod, o.RetryPeriod, "How long clients wait between attempts to take or renew the lease.")
	fs.StringVar(&o.Namespace, n.Namespace, o.Namespace, "Namespace of the Lease. Empty means the pod's own namespace, or kube-system outside a pod.")
	if n.Name != "" {
		fs.StringVar(&o.Name, n.Name, o.Name, "Name of the Lease.")
	}
	if n.Labels != "" {
		fs.Var(labelsFlag{&o.Labels}, n.Labels, "Labels the Lease gets while this process leads, as key:value pairs separated by commas.")
	}
}

// Validate checks the options RunElected needs when leader election is
// on: the timings (CheckTimings), a name, labels the API server takes,
// and a drain timeout that is not negative.
func (o LeaderOptions) Validate() error {
	var errs []string
	if err := o.CheckTimings(); err != nil {
		errs = append(errs, err.Error())
	}
	if o.Name == "" {
		errs = append(errs, "the lease has no name")
	}
	if err := o.Labels.Check(); err != nil {
		errs = append(errs, "labels: "+err.Error())
	}
	if o.DrainTimeout < 0 {
		errs = append(errs, "the drain timeout is negative")
	}
	if len(errs) > 0 {
		return errors.New("leader election: " + strings.Join(errs, "; "))
	}
	return nil
}

// CheckTimings checks what the duration flags set: the lease duration
// longer than the renew deadline, the renew deadline longer than the retry
// period, and the retry period positive (client-go's elector refuses it
// otherwise).
func (o LeaderOptions) CheckTimings() error {
	var errs []string
	if o.LeaseDuration <= o.RenewDeadline {
		errs = append(errs, "the lease duration must be longer than the renew deadline")
	}
	if o.RenewDeadline <= o.RetryPeriod {
		errs = append(errs, "the renew deadline must be longer than the retry period")
	}
	if o.RetryPeriod <= 0 {
		errs = append(errs, "the retry period must be positive")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// podNamespace is the namespace a pod runs in, "" outside a pod.
func podNamespace() string {
	data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// RunElected runs run while this process leads, or at once when leader
// election is off, and returns run's error.
//
// The work guarded by the lease must be over before anyone else may lead, so
// the order on the way out is: ctx ends (or the lease is lost), run's context
// ends, run returns, the lease stops being renewed, and only then is the lease
// handed back (emptied, so that a stand-by replica takes it at once) and
// RunElected returns. The lease is kept renewed while run drains.
//
// run must not return before the work it started is over (Work.Run makes
// such a function of goroutines). Its drain is bounded: DrainTimeout after
// ctx ends; and after a lost lease (renewal failed), LeaseDuration -
// RenewDeadline at most, as the last renewal was at least RenewDeadline ago
// and another replica may take the lease LeaseDuration after it. Past the
// bound RunElected stops renewing and returns ErrWorkNotStopped without
// handing the lease back: the caller must exit, which ends the work (as
// kube-controller-manager exits on a lost lease).
//
// If run returns by itself while ctx is alive, this process stops leading and
// RunElected returns run's error. Losing the lease while ctx is alive returns
// an error (after run returned): the caller should exit, so that a restarted
// process starts from clean caches.
func RunElected(ctx context.Context, client kubernetes.Interface, o LeaderOptions, health *Health, run func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	if !o.Enabled {
		health.SetReady()
		o.leaderStatus("", true)
		defer o.leaderStatus("", false)
		return runBounded(ctx, o.DrainTimeout, run)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Namespace == "" {
		if o.Namespace = podNamespace(); o.Namespace == "" {
			o.Namespace = "kube-system"
		}
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = host + "_" + uuid.NewString()
	}
	lock, err := resourcelock.NewWithLabels(resourcelock.LeasesResourceLock, o.Namespace, o.Name,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: o.Identity}, o.Labels)
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	lease := o.Namespace + "/" + o.Name
	o.leaderStatus(lease, false)

	// The elector runs on its own context, which outlives ctx until run has
	// returned: client-go's elector starts OnStartedLeading in a goroutine
	// and stops renewing as soon as its context ends, without waiting for it.
	// For the same reason it does not release the lease itself
	// (ReleaseOnCancel is off); release below does, after run returned.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	var (
		mu       sync.Mutex
		leading  bool // run was started
		over     bool // the elector returned: too late to start run
		finished = make(chan struct{})
		runErr   error
		runEnded bool // run returned while ctx and the lease were alive
		expired  bool // run did not return within DrainTimeout
	)
	// Standing by when ctx ends: nothing to wait for.
	stopWatch := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !leading {
			stopElecting()
		}
	})
	defer stopWatch()

	watchdog := leaderelection.NewLeaderHealthzAdaptor(o.RenewDeadline * 2)
	health.AddCheck("leader-election", watchdog.Check)
	health.SetReady()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		ReleaseOnCancel: false,
		WatchDog:        watchdog,
		Name:            o.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			// leadCtx ends when the lease is lost; ctx ending ends the
			// work's context too.
			OnStartedLeading: func(leadCtx context.Context) {
				mu.Lock()
				if over || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				leading = true
				mu.Unlock()
				o.leaderStatus(lease, true)
				defer o.leaderStatus(lease, false) // the work is over
				defer close(finished)
				defer stopElecting() // the work is over: stop renewing
				workCtx, cancel := context.WithCancel(leadCtx)
				defer cancel()
				defer context.AfterFunc(ctx, cancel)()
				// The drain's bound: past it, stop renewing (the lease
				// then expires; it is not handed back).
				go func() {
					select {
					case <-finished:
						return
					case <-workCtx.Done():
					}
					if o.DrainTimeout <= 0 {
						return
					}
					t := time.NewTimer(o.DrainTimeout)
					defer t.Stop()
					select {
					case <-finished:
					case <-t.C:
						mu.Lock()
						expired = true
						mu.Unlock()
						stopElecting()
					}
				}()
				logger.Info("Became leader", "lease", lease, "identity", o.Identity)
				runErr = run(workCtx)
				runEnded = workCtx.Err() == nil
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				if id != o.Identity {
					logger.Info("Another replica leads", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	elector.Run(electCtx)
	mu.Lock()
	over = true
	wasLeading := leading
	mu.Unlock()
	if !wasLeading {
		if ctx.Err() == nil {
			return errors.New("leader election lost")
		}
		return nil // ctx ended while standing by
	}
	select {
	case <-finished:
	default:
		// Either run outlived DrainTimeout, or the lease was lost while
		// run works: wait no longer than another replica would.
		mu.Lock()
		bound := time.Duration(0)
		if !expired {
			bound = o.LeaseDuration - o.RenewDeadline
			if o.DrainTimeout > 0 {
				bound = min(bound, o.DrainTimeout)
			}
		}
		mu.Unlock()
		t := time.NewTimer(bound)
		defer t.Stop()
		select {
		case <-finished:
		case <-t.C:
			logger.Error(nil, "The work did not stop in time; leaving the lease to expire", "lease", lease,
				"leaseLost", ctx.Err() == nil && !expired)
			return ErrWorkNotStopped
		}
	}
	if err := release(ctx, lock, o.Identity, o.RenewDeadline); err != nil {
		logger.Error(err, "Could not hand back the lease; another replica takes it when it expires", "lease", lease)
	} else {
		logger.Info("Stopped leading", "lease", lease)
	}
	switch {
	case runErr != nil:
		return runErr
	case ctx.Err() == nil && !runEnded:
		return errors.New("leader election lost")
	}
	return nil
}

// release empties the lease if it still names identity, so that a stand-by
// replica need not wait for it to expire. The write is conditional on the
// resource version just read, so it cannot undo another replica's take-over.
func release(ctx context.Context, lock resourcelock.Interface, identity string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	if err != nil {
		return err
	}
	if rec.HolderIdentity != identity {
		return nil
	}
	now := metav1.Now()
	return lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now, LeaderTransitions: rec.LeaderTransitions,
	})
}

// runBounded is run(ctx) without leader election: it returns run's error,
// or ErrWorkNotStopped when run has not returned timeout after ctx ended
// (0: no bound).
func runBounded(ctx context.Context, timeout time.Duration, run func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	if timeout <= 0 {
		return <-done
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		klog.FromContext(ctx).Error(nil, "The work did not stop in time", "timeout", timeout)
		return ErrWorkNotStopped
	}
}
