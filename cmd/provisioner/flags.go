package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/internal/cli"
	"github.com/tether-csi/tether/pkg/nodeloss"
	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	"github.com/tether-csi/tether/pkg/provisioner/sweep"
	"github.com/tether-csi/tether/pkg/server"
)

type options struct {
	kube                          server.KubeOptions
	leader                        server.LeaderOptions
	csiAddress                    string
	timeout                       time.Duration
	request                       request.Options
	retryStart, retryMax          time.Duration
	workers                       uint
	strictTopology, immediateTopo bool
	httpEndpoint                  string
	pprof                         bool
	secure                        server.SecureOptions
	node                          provisioner.NodeDeployment
	nodeDeployment                bool
	capacity                      bool
	capacityImmediate             bool
	capacityPoll                  time.Duration
	capacityOwnerLevel            int
	capacityThreads               uint
	orphans                       sweep.Options
	clusterID                     string
	handBack                      bool
	nodeLossGrace                 time.Duration
	env                           podEnv
	compat                        compatOptions
}

// compatOptions are the flags external-provisioner (EP) v6.4.0 has and
// tether takes with the same meaning, so that EP's manifests run tether
// unchanged.
type compatOptions struct {
	showVersion bool
	// master is the API server's address (with --kubeconfig or alone).
	master string
	// metricsAddress is EP's deprecated alias of --http-endpoint.
	metricsAddress string
	metricsPath    string
	// logging is EP's logging configuration, set by component-base's
	// flags (--logging-format, -v, …) and applied by applyLogging.
	logging *logsapi.LoggingConfiguration
	// capacityQPS and capacityBurst limit the client of the capacity
	// publisher; zero shares the main client.
	capacityQPS   float64
	capacityBurst int
	// cloningThreads are the workers of the clone protection controller.
	cloningThreads uint
	// preventModeConversion is --prevent-volume-mode-conversion.
	preventModeConversion bool
}

// defaultOptions are the flags' defaults.
func defaultOptions() options {
	o := options{
		// external-provisioner's 5 and 10 allow a few claims a second; a
		// claim costs about seven requests, so these allow hundreds.
		kube:               server.KubeOptions{QPS: 1000, Burst: 2000},
		leader:             server.DefaultLeaderOptions("", false),
		csiAddress:         "/run/csi/socket",
		timeout:            10 * time.Second,
		request:            request.Options{VolumeNamePrefix: "pvc", VolumeNameUUIDLen: -1},
		retryStart:         time.Second,
		retryMax:           5 * time.Minute,
		workers:            100,
		immediateTopo:      true,
		node:               provisioner.NodeDeployment{ImmediateBinding: true, BaseDelay: 20 * time.Second, MaxDelay: 60 * time.Second},
		capacityPoll:       time.Minute,
		capacityOwnerLevel: 1,
		capacityThreads:    1,
		orphans:            sweep.Options{Policy: sweep.Report, Interval: 10 * time.Minute, MinAge: time.Hour},
		nodeLossGrace:      nodeloss.DefaultGrace,
		compat: compatOptions{metricsPath: "/metrics", logging: logsapi.NewLoggingConfiguration(), cloningThreads: 2,
			preventModeConversion: true},
	}
	o.leader.RetryPeriod = 5 * time.Second // external-provisioner's default
	return o
}

// ignoredFlags are EP's flags that tether accepts and does nothing with,
// each with the reason. A given one is logged once at start-up.
var ignoredFlags = map[string]string{
	"feature-gates":                  "EP's feature gates switch EP features; tether has no gates",
	"automaxprocs":                   "Go sets GOMAXPROCS from the container's CPU limit by itself",
	"snapshot-orphan-sweep-interval": "restored snapshots are released on claim events, with no sweep",
}

// newFlagSet registers every flag on o.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("provisioner", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: provisioner [flags]\n\nProvisions and deletes volumes through a CSI driver, as external-provisioner does.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// As EP: the logging flags are component-base's; of klog's settings
	// only -v and --vmodule are among them.
	logsapi.AddGoFlags(o.compat.logging, fs)
	o.kube.AddFlags(fs)
	o.leader.AddFlags(fs, server.EPLeaderFlags)
	fs.StringVar(&o.csiAddress, "csi-address", o.csiAddress, "Path of the CSI driver's unix socket.")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "Timeout of each CSI call (creation, deletion, capacity).")
	fs.StringVar(&o.request.VolumeNamePrefix, "volume-name-prefix", o.request.VolumeNamePrefix, "Prefix of the names of created volumes (and their PVs).")
	fs.IntVar(&o.request.VolumeNameUUIDLen, "volume-name-uuid-length", o.request.VolumeNameUUIDLen, "Cut the claim UID in volume names to this length; negative keeps it whole.")
	fs.StringVar(&o.request.DefaultFSType, "default-fstype", "", "Filesystem type when the class names none.")
	fs.BoolVar(&o.request.ExtraCreateMetadata, "extra-create-metadata", false, "Pass the claim's name and namespace and the PV's name to CreateVolume as parameters.")
	fs.BoolVar(&o.request.ControllerPublishReadOnly, "controller-publish-readonly", false, "Give the PV of a claim whose only access mode is ReadOnlyMany csi.readOnly: true, which an attacher passes to ControllerPublishVolume.")
	fs.DurationVar(&o.retryStart, "retry-interval-start", o.retryStart, "First retry interval after a failed provisioning or deletion; it doubles up to --retry-interval-max.")
	fs.DurationVar(&o.retryMax, "retry-interval-max", o.retryMax, "Longest retry interval.")
	fs.UintVar(&o.workers, "worker-threads", o.workers, "Provisioning and deletion workers: the number of CSI calls at once.")
	fs.BoolVar(&o.strictTopology, "strict-topology", false, "With a selected node, ask only for that node's topology segment.")
	fs.BoolVar(&o.immediateTopo, "immediate-topology", o.immediateTopo, "For Immediate classes, pass every segment where the driver runs (true) or no topology (false).")
	fs.StringVar(&o.httpEndpoint, "http-endpoint", "", "Address (host:port) to serve metrics (--metrics-path), /healthz and /healthz/<check> on. Empty serves nothing.")
	fs.BoolVar(&o.pprof, "enable-pprof", false, "Also serve Go's profiles under /debug/pprof/ on --http-endpoint.")
	o.secure.AddFlags(fs)
	fs.BoolVar(&o.nodeDeployment, "node-deployment", false, "Run beside the driver on each node (node name from NODE_NAME): provision only claims whose selected node is this one, delete only volumes on it.")
	fs.BoolVar(&o.node.ImmediateBinding, "node-deployment-immediate-binding", o.node.ImmediateBinding, "In node-deployment mode, compete for claims of Immediate classes.")
	fs.DurationVar(&o.node.BaseDelay, "node-deployment-base-delay", o.node.BaseDelay, "In node-deployment mode, the first wait before trying to own an Immediate claim; it doubles with each attempt.")
	fs.DurationVar(&o.node.MaxDelay, "node-deployment-max-delay", o.node.MaxDelay, "In node-deployment mode, the longest wait before trying to own an Immediate claim.")
	fs.BoolVar(&o.capacity, "enable-capacity", false, "Publish CSIStorageCapacity objects from the driver's GetCapacity (namespace from NAMESPACE, owner from POD_NAME).")
	fs.BoolVar(&o.capacityImmediate, "capacity-for-immediate-binding", false, "Also publish capacity for Immediate classes.")
	fs.DurationVar(&o.capacityPoll, "capacity-poll-interval", o.capacityPoll, "How often capacity is asked for again.")
	fs.IntVar(&o.capacityOwnerLevel, "capacity-ownerref-level", o.capacityOwnerLevel, "Owner of the capacity objects: 0 this pod, 1 its controller (DaemonSet, StatefulSet, ReplicaSet), 2 that one's (the Deployment), and so on, any kind; negative for none.")
	fs.UintVar(&o.capacityThreads, "capacity-threads", o.capacityThreads, "GetCapacity calls a capacity refresh makes at a time.")
	fs.StringVar((*string)(&o.orphans.Policy), "orphan-policy", string(o.orphans.Policy), "What the orphan sweep does with a backend volume that has our name prefix but no PV and no in-flight claim: report (a metric and an event) or delete.")
	fs.DurationVar(&o.orphans.Interval, "orphan-sweep-interval", o.orphans.Interval, "How often the orphan sweep lists the driver's volumes (when it has LIST_VOLUMES); 0 turns it off.")
	fs.DurationVar(&o.orphans.MinAge, "orphan-min-age", o.orphans.MinAge, "With --orphan-policy=delete, how long a volume must have been seen orphaned before it is deleted.")
	fs.DurationVar(&o.nodeLossGrace, "node-loss-grace", o.nodeLossGrace, "In node-deployment mode, how long the node of another node's in-flight record must be lost (deleted, or tainted "+v1.TaintNodeOutOfService+"; never merely NotReady) before the record is dropped without a driver call; give it the binder's --node-loss-grace.")
	fs.BoolVar(&o.handBack, "hand-back", false, "Run once before switching back to external-provisioner and KCM's binder: drop every in-flight record whose PV is saved, clean up the volumes of deleted claims, list the claims still waiting for a volume (exit status 3 while any is left), and exit.")
	fs.StringVar(&o.clusterID, "cluster-id", "", "With --orphan-policy=delete, this cluster's ID in the ownership mark (the "+request.OwnerKey+" CreateVolume parameter) that new volumes get and that the sweep deletes by; empty is the UID of the kube-system namespace.")
	addCompatFlags(fs, &o.compat)
	return fs
}

// addCompatFlags registers the rest of EP's flags: those tether honours
// and those it accepts and ignores (ignoredFlags).
func addCompatFlags(fs *flag.FlagSet, c *compatOptions) {
	fs.BoolVar(&c.showVersion, "version", false, "Print the version and exit.")
	fs.StringVar(&c.master, "master", "", "Address of the API server; overrides the kubeconfig's. With neither, the in-cluster configuration.")
	fs.StringVar(&c.metricsAddress, "metrics-address", "", "Deprecated (as in external-provisioner): the same as --http-endpoint; only one of the two may be set.")
	fs.StringVar(&c.metricsPath, "metrics-path", c.metricsPath, "HTTP path of the metrics on --http-endpoint.")
	fs.Float64Var(&c.capacityQPS, "kube-api-capacity-qps", 0, "Queries per second of the capacity publisher's own client; 0 shares the main client (--kube-api-qps).")
	fs.IntVar(&c.capacityBurst, "kube-api-capacity-burst", 0, "Burst of the capacity publisher's own client; 0 shares the main client (--kube-api-burst).")
	fs.UintVar(&c.cloningThreads, "cloning-protection-threads", c.cloningThreads, "Workers of the controllers that release the sources of finished clones and the snapshots of finished restores.")

	ignored := func(name string) string {
		return "Accepted for external-provisioner's manifests and ignored: " + ignoredFlags[name] + "."
	}
	fs.Var(&featureGates{}, "feature-gates", ignored("feature-gates"))
	fs.BoolFunc("automaxprocs", ignored("automaxprocs"), func(s string) error {
		if s == "" {
			return nil
		}
		_, err := strconv.ParseBool(s)
		return err
	})
	var d time.Duration
	fs.DurationVar(&d, "snapshot-orphan-sweep-interval", 5*time.Minute, ignored("snapshot-orphan-sweep-interval"))
	fs.BoolVar(&c.preventModeConversion, "prevent-volume-mode-conversion", c.preventModeConversion,
		"Refuse to restore a snapshot into another volume mode than its source's, unless its VolumeSnapshotContent has "+request.AnnAllowVolumeModeChange+"=true. Clones across volume modes are always refused.")
}

// featureGates takes EP's --feature-gates syntax (Name=bool,…).
type featureGates struct{ set []string }

func (f *featureGates) String() string { return strings.Join(f.set, ",") }

func (f *featureGates) Set(v string) error {
	for _, kv := range strings.Split(v, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("missing bool value for %s", kv)
		}
		if _, err := strconv.ParseBool(strings.TrimSpace(val)); err != nil {
			return fmt.Errorf("invalid value of %s=%s: %w", name, val, err)
		}
		f.set = append(f.set, kv)
	}
	return nil
}

// parseFlags parses args onto o. Help asked for is printed on stdout and
// returns flag.ErrHelp; a syntax error is returned in one line, without
// the usage (cli.Parse). An argument that is not a flag is an error too. The values are
// checked by checkOptions.
func parseFlags(o *options, args []string, stdout, stderr io.Writer) (*flag.FlagSet, error) {
	fs := newFlagSet(o)
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return fs, err
	}
	if fs.NArg() > 0 {
		// Go's flag package stops at the first non-flag: every flag
		// after it would be dropped without a word.
		return fs, fmt.Errorf("unexpected argument %q: every argument must be a flag", fs.Arg(0))
	}
	return fs, nil
}

// endpoint is the address to serve HTTP on: --http-endpoint, or EP's
// deprecated --metrics-address (checkOptions refuses both at once).
func (o options) endpoint() string {
	if o.compat.metricsAddress != "" {
		return o.compat.metricsAddress
	}
	return o.httpEndpoint
}

// givenIgnored lists the ignored flags that were given, with the reason.
func givenIgnored(fs *flag.FlagSet) []string {
	var out []string
	fs.Visit(func(f *flag.Flag) {
		if reason, ok := ignoredFlags[f.Name]; ok {
			out = append(out, fmt.Sprintf("--%s (%s)", f.Name, reason))
		}
	})
	slices.Sort(out)
	return out
}

// restConfig builds the client configuration. --master, as in EP, names
// the API server: it overrides the kubeconfig's address, and alone gives a
// configuration with that address and no credentials.
func (o options) restConfig(userAgent string) (*rest.Config, error) {
	master := o.compat.master
	if master == "" || o.kube.Kubeconfig != "" {
		cfg, err := o.kube.RestConfig(userAgent)
		if err == nil && master != "" {
			cfg.Host = master
		}
		return cfg, err
	}
	if err := o.kube.Validate(); err != nil {
		return nil, err
	}
	cfg := &rest.Config{Host: master, QPS: float32(o.kube.QPS), Burst: o.kube.Burst, UserAgent: userAgent}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg, nil
}

// capacityConfig is the configuration of the capacity publisher's client:
// cfg with --kube-api-capacity-qps and -burst when set, else nil (share
// the main client).
func (c compatOptions) capacityConfig(cfg *rest.Config) *rest.Config {
	if c.capacityQPS == 0 && c.capacityBurst == 0 {
		return nil
	}
	out := rest.CopyConfig(cfg)
	if c.capacityQPS > 0 {
		out.QPS = float32(c.capacityQPS)
	}
	if c.capacityBurst > 0 {
		out.Burst = c.capacityBurst
	}
	return out
}

// deprecatedParamsLogger logs, once per version of each class of this
// driver, the deprecated parameter keys it uses (EP logs the same warning at
// every provisioning).
func deprecatedParamsLogger(ctx context.Context, driver string) cache.ResourceEventHandler {
	warn := func(obj any) {
		class, ok := obj.(*storagev1.StorageClass)
		if !ok || class.Provisioner != driver {
			return
		}
		if p, err := request.ParseClassParams(class.Parameters); err == nil && len(p.Warnings) > 0 {
			klog.FromContext(ctx).Info("Warning: StorageClass uses deprecated parameters", "storageClass", klog.KObj(class), "warnings", p.Warnings)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: warn,
		UpdateFunc: func(old, obj any) {
			if o, ok := old.(*storagev1.StorageClass); !ok || o.ResourceVersion != obj.(*storagev1.StorageClass).ResourceVersion {
				warn(obj)
			}
		},
	}
}
