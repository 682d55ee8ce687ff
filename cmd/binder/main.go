package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/internal/cli"
	"github.com/tether-csi/tether/internal/gogc"
	"github.com/tether-csi/tether/internal/version"
	"github.com/tether-csi/tether/pkg/binder"
	"github.com/tether-csi/tether/pkg/nodeloss"
	"github.com/tether-csi/tether/pkg/server"
)

type options struct {
	kube         server.KubeOptions
	leader       server.LeaderOptions
	workers      int
	resync       time.Duration
	httpEndpoint string
	pprof        bool
	secure       server.SecureOptions
	showVersion  bool
	nodeLoss     time.Duration
}

// defaultOptions are the flags' defaults.
func defaultOptions() options {
	o := options{
		// A bind takes four writes (the volume's claimRef and phase, the claim's
		// volumeName and phase: pkg/binder/apply.go); these limits let it
		// bind a few hundred claims a second.
		kube:   server.KubeOptions{QPS: 1000, Burst: 2000},
		leader: server.DefaultLeaderOptions("tether-binder", true),
		// 100, as EP's --worker-threads: on a CPU-bound API server more
		// writes in flight make each cheaper (etcd batches them): make
		// bench-binder on 1000 pairs gave 0.85 of the floor with 16
		// workers, 0.87 with 48 and 0.92 with 128; with etcd far away the
		// workers bound the rate. More workers meet provisioned volumes
		// sooner; the provisioner's claimRef names the version of its
		// in-flight write, so the binder waits for it instead of
		// conflicting (provisioner.LibraryClient).
		workers:  100,
		resync:   15 * time.Second,
		nodeLoss: nodeloss.DefaultGrace,
	}
	return o
}

// newFlagSet registers every flag on o.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("binder", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: binder [flags]\n\nBinds PersistentVolumeClaims to PersistentVolumes, in place of kube-controller-manager's\npersistentvolume-binder-controller (run that with --controllers=*,bootstrapsigner,tokencleaner,-persistentvolume-binder-controller).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	klog.InitFlags(fs)
	o.kube.AddFlags(fs)
	o.leader.AddFlags(fs, server.KCMLeaderFlags)
	fs.IntVar(&o.workers, "workers", o.workers, "Claim workers, and as many volume workers. Each key is handled by one worker at a time.")
	fs.DurationVar(&o.resync, "resync-period", o.resync, "How often every claim and volume is synced again even without a change; a claim and volume bound to each other with nothing left to write are not.")
	fs.StringVar(&o.httpEndpoint, "http-endpoint", "", "Address (host:port) to serve /metrics and /healthz on. Empty serves nothing.")
	fs.BoolVar(&o.pprof, "enable-pprof", false, "Also serve Go's profiles under /debug/pprof/ on --http-endpoint.")
	o.secure.AddFlags(fs)
	fs.DurationVar(&o.nodeLoss, "node-loss-grace", o.nodeLoss, "How long the one node of a bound volume must be lost (deleted, or tainted "+v1.TaintNodeOutOfService+"; never merely NotReady) before its claim is released, in classes annotated "+nodeloss.AnnPolicy+"=true (docs/design.md, \"Node loss\").")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
	return fs
}

// parseFlags parses the command line into o: help asked for is printed on
// stdout and returns flag.ErrHelp; a syntax error is returned in one line,
// without the usage (cli.Parse); an argument that is not a flag is an error (and not, as with
// the flag package alone, the silent end of the flags). checkOptions checks
// the values.
func parseFlags(o *options, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(o)
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: the binder takes flags only", fs.Args())
	}
	return nil
}

// checkOptions checks every setting before --version prints and before the
// binder reads a kubeconfig: a value no binder can run with is an error (a
// bad setting, exit status 2). What only the cluster can say (a kubeconfig
// that does not load, a port in use) is left to run.
func checkOptions(o options) error {
	switch {
	case o.workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", o.workers)
	case o.resync <= 0:
		return fmt.Errorf("--resync-period must be positive, got %s", o.resync)
	case o.nodeLoss <= 0:
		return fmt.Errorf("--node-loss-grace must be positive, got %s", o.nodeLoss)
	}
	if err := o.kube.Validate(); err != nil {
		return err
	}
	if err := (server.HTTPOptions{Addr: o.httpEndpoint, Secure: o.secure}).Validate(); err != nil {
		return err
	}
	if o.leader.Enabled {
		if err := o.leader.Validate(); err != nil {
			return fmt.Errorf("--leader-elect: %w", err)
		}
	}
	return nil
}

// begin is main's start: it parses args (the program's name first) and
// checks every setting. exit is true when the process ends here, with
// status: 0 after the help (on stdout) or the version (with the name
// "binder", whatever args[0] is), which prints only once every setting
// passed; cli.ExitBadSetting after a bad setting, said
// on stderr.
func begin(args []string, stdout, stderr io.Writer) (o options, status int, exit bool) {
	o = defaultOptions()
	err := parseFlags(&o, args[1:], stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return o, 0, true
	}
	if err == nil {
		err = checkOptions(o)
	}
	if err != nil {
		fmt.Fprintln(stderr, "binder:", err)
		return o, cli.ExitBadSetting, true
	}
	if o.showVersion {
		fmt.Fprintln(stdout, "binder", version.String())
		return o, 0, true
	}
	return o, 0, false
}

func main() {
	o, status, exit := begin(os.Args, os.Stdout, os.Stderr)
	if exit {
		os.Exit(status)
	}
	gogc.Default(gcPercent, os.LookupEnv)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background().WithName("binder"))
	gogc.MemoryLimit(ctx, klog.FromContext(ctx), memlimit.FromCgroup)
	klog.FromContext(ctx).Info("Version", "version", version.String())
	if err := run(ctx, o); err != nil {
		if server.StoppedEarly(ctx, err) {
			klog.FromContext(ctx).Info("Stopped by a signal before it had started", "interrupted", err.Error())
			klog.Flush()
			return
		}
		klog.FromContext(ctx).Error(err, "Binder failed")
		klog.Flush()
		os.Exit(cli.ExitFailed)
	}
	klog.Flush()
}

func run(ctx context.Context, o options) error {
	cfg, err := o.kube.RestConfig("tether-binder")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	reg := server.NewRegistry()
	health := &server.Health{}
	guard, err := o.secure.NewGuard(cfg)
	if err != nil {
		return err
	}
	if _, err := server.Serve(ctx, server.HTTPOptions{Addr: o.httpEndpoint, Registry: reg, Health: health, Pprof: o.pprof,
		Secure: o.secure, Guard: guard}); err != nil {
		return err
	}
	if o.leader.Status, err = server.NewLeaderStatus(reg, "binder"); err != nil {
		return err
	}
	// An API server newer than the binder's API types may hold fields an
	// update would drop: then every write is a patch (read again every 5
	// minutes: a control plane is upgraded under a running binder).
	skew := server.WatchSkew(ctx, client.Discovery(), server.APITypesMinor, 5*time.Minute)
	ctrl, err := binder.New(binder.Options{Client: client, Workers: o.workers, ResyncPeriod: o.resync, Registerer: reg,
		NodeLossGrace: o.nodeLoss, PatchAll: skew.Newer})
	if err != nil {
		return err
	}
	if err := binder.RegisterPendingMetrics(reg, ctrl); err != nil {
		return err
	}
	// Warm standby: the caches fill while this replica waits for the
	// lease, so that it binds as soon as it leads (the workers start then).
	ctrl.Start(ctx)
	return server.RunElected(ctx, client, o.leader, health, ctrl.Run)
}
