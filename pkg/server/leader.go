package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// LeaderFlagNames name the leader-election flags, which differ between
// kube-controller-manager (--leader-elect…) and external-provisioner
// (--leader-election…). An empty name registers no flag.
type LeaderFlagNames struct {
	Enable, LeaseDuration, RenewDeadline, RetryPeriod, Namespace, Name string
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
	Namespace: "leader-election-namespace",
}

// LeaderOptions configure leader election on a coordination.k8s.io Lease.
type LeaderOptions struct {
	Enabled                                   bool
	Namespace, Name                           string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Identity defaults to the host name plus a random suffix.
	Identity string
}

// DefaultLeaderOptions are client-go's usual timings.
func DefaultLeaderOptions(name string, enabled bool) LeaderOptions {
	return LeaderOptions{Enabled: enabled, Name: name, LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

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
}

func (o LeaderOptions) validate() error {
	var errs []string
	if o.LeaseDuration <= o.RenewDeadline {
		errs = append(errs, "the lease duration must be longer than the renew deadline")
	}
	if o.RenewDeadline <= o.RetryPeriod {
		errs = append(errs, "the renew deadline must be longer than the retry period")
	}
	if o.Name == "" {
		errs = append(errs, "the lease has no name")
	}
	if len(errs) > 0 {
		return errors.New("leader election: " + strings.Join(errs, "; "))
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

// RunElected runs run(ctx) while this process leads, or at once when
// leader election is off. It returns when ctx ends. Losing the lease while
// ctx is alive returns an error: the caller should exit, so that a
// restarted process starts from clean caches.
func RunElected(ctx context.Context, client kubernetes.Interface, o LeaderOptions, health *Health, run func(context.Context)) error {
	logger := klog.FromContext(ctx)
	if !o.Enabled {
		health.SetReady()
		run(ctx)
		return nil
	}
	if err := o.validate(); err != nil {
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
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.Namespace, o.Name,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: o.Identity})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	watchdog := leaderelection.NewLeaderHealthzAdaptor(o.RenewDeadline * 2)
	health.AddCheck("leader-election", watchdog.Check)
	health.SetReady()
	lost := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        watchdog,
		Name:            o.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Became leader", "lease", o.Namespace+"/"+o.Name, "identity", o.Identity)
				run(ctx)
			},
			OnStoppedLeading: func() { close(lost) },
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
	elector.Run(ctx)
	<-lost
	if ctx.Err() == nil {
		return errors.New("leader election lost")
	}
	return nil
}
