// Command provisioner is tether's CSI external-provisioner sidecar.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
	libmetrics "sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller/metrics"

	"github.com/tether-csi/tether/pkg/capacity"
	tcsi "github.com/tether-csi/tether/pkg/csi"
	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/pkg/server"
)

type options struct {
	kube                          server.KubeOptions
	leader                        server.LeaderOptions
	csiAddress                    string
	timeout                       time.Duration
	request                       provisioner.RequestOptions
	retryStart, retryMax          time.Duration
	workers                       uint
	strictTopology, immediateTopo bool
	httpEndpoint                  string
	pprof                         bool
	node                          provisioner.NodeDeployment
	nodeDeployment                bool
	capacity                      bool
	capacityImmediate             bool
	capacityPoll                  time.Duration
	capacityOwnerLevel            int
	orphans                       provisioner.SweepOptions
	clusterID                     string
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
		request:            provisioner.RequestOptions{VolumeNamePrefix: "pvc", VolumeNameUUIDLen: -1},
		retryStart:         time.Second,
		retryMax:           5 * time.Minute,
		workers:            100,
		immediateTopo:      true,
		node:               provisioner.NodeDeployment{ImmediateBinding: true, BaseDelay: 20 * time.Second, MaxDelay: 60 * time.Second},
		capacityPoll:       time.Minute,
		capacityOwnerLevel: 1,
		orphans:            provisioner.SweepOptions{Policy: provisioner.OrphanReport, Interval: 10 * time.Minute, MinAge: time.Hour},
	}
	o.leader.RetryPeriod = 5 * time.Second // external-provisioner's default
	return o
}

// newFlagSet registers every flag on o.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("provisioner", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: provisioner [flags]\n\nProvisions and deletes volumes through a CSI driver, as external-provisioner does.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	klog.InitFlags(fs)
	o.kube.AddFlags(fs)
	o.leader.AddFlags(fs, server.EPLeaderFlags)
	fs.StringVar(&o.csiAddress, "csi-address", o.csiAddress, "Path of the CSI driver's unix socket.")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "Timeout of each CSI call (creation, deletion, capacity).")
	fs.StringVar(&o.request.VolumeNamePrefix, "volume-name-prefix", o.request.VolumeNamePrefix, "Prefix of the names of created volumes (and their PVs).")
	fs.IntVar(&o.request.VolumeNameUUIDLen, "volume-name-uuid-length", o.request.VolumeNameUUIDLen, "Cut the claim UID in volume names to this length; negative keeps it whole.")
	fs.StringVar(&o.request.DefaultFSType, "default-fstype", "", "Filesystem type when the class names none.")
	fs.BoolVar(&o.request.ExtraCreateMetadata, "extra-create-metadata", false, "Pass the claim's name and namespace and the PV's name to CreateVolume as parameters.")
	fs.DurationVar(&o.retryStart, "retry-interval-start", o.retryStart, "First retry interval after a failed provisioning or deletion; it doubles up to --retry-interval-max.")
	fs.DurationVar(&o.retryMax, "retry-interval-max", o.retryMax, "Longest retry interval.")
	fs.UintVar(&o.workers, "worker-threads", o.workers, "Provisioning and deletion workers: the number of CSI calls at once.")
	fs.BoolVar(&o.strictTopology, "strict-topology", false, "With a selected node, ask only for that node's topology segment.")
	fs.BoolVar(&o.immediateTopo, "immediate-topology", o.immediateTopo, "For Immediate classes, pass every segment where the driver runs (true) or no topology (false).")
	fs.StringVar(&o.httpEndpoint, "http-endpoint", "", "Address (host:port) to serve /metrics and /healthz on. Empty serves nothing.")
	fs.BoolVar(&o.pprof, "enable-pprof", false, "Also serve Go's profiles under /debug/pprof/ on --http-endpoint.")
	fs.BoolVar(&o.nodeDeployment, "node-deployment", false, "Run beside the driver on each node (node name from NODE_NAME): provision only claims whose selected node is this one, delete only volumes on it.")
	fs.BoolVar(&o.node.ImmediateBinding, "node-deployment-immediate-binding", o.node.ImmediateBinding, "In node-deployment mode, compete for claims of Immediate classes.")
	fs.DurationVar(&o.node.BaseDelay, "node-deployment-base-delay", o.node.BaseDelay, "In node-deployment mode, the first wait before trying to own an Immediate claim; it doubles with each attempt.")
	fs.DurationVar(&o.node.MaxDelay, "node-deployment-max-delay", o.node.MaxDelay, "In node-deployment mode, the longest wait before trying to own an Immediate claim.")
	fs.BoolVar(&o.capacity, "enable-capacity", false, "Publish CSIStorageCapacity objects from the driver's GetCapacity (namespace from NAMESPACE, owner from POD_NAME).")
	fs.BoolVar(&o.capacityImmediate, "capacity-for-immediate-binding", false, "Also publish capacity for Immediate classes.")
	fs.DurationVar(&o.capacityPoll, "capacity-poll-interval", o.capacityPoll, "How often capacity is asked for again.")
	fs.IntVar(&o.capacityOwnerLevel, "capacity-ownerref-level", o.capacityOwnerLevel, "Owner of the capacity objects: 0 this pod, 1 its DaemonSet or ReplicaSet, 2 the Deployment; negative for none.")
	fs.StringVar((*string)(&o.orphans.Policy), "orphan-policy", string(o.orphans.Policy), "What the orphan sweep does with a backend volume that has our name prefix but no PV and no in-flight claim: report (a metric and an event) or delete.")
	fs.DurationVar(&o.orphans.Interval, "orphan-sweep-interval", o.orphans.Interval, "How often the orphan sweep lists the driver's volumes (when it has LIST_VOLUMES); 0 turns it off.")
	fs.DurationVar(&o.orphans.MinAge, "orphan-min-age", o.orphans.MinAge, "With --orphan-policy=delete, how long a volume must have been seen orphaned before it is deleted.")
	fs.StringVar(&o.clusterID, "cluster-id", "", "With --orphan-policy=delete, this cluster's ID in the ownership mark (the "+provisioner.OwnerKey+" CreateVolume parameter) that new volumes get and that the sweep deletes by; empty is the UID of the kube-system namespace.")
	return fs
}

func main() {
	o := defaultOptions()
	fs := newFlagSet(&o)
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background().WithName("provisioner"))
	if err := run(ctx, o); err != nil {
		klog.FromContext(ctx).Error(err, "Provisioner failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

func run(ctx context.Context, o options) error {
	if o.workers == 0 {
		return fmt.Errorf("--worker-threads must be at least 1")
	}
	reg := server.NewRegistry()
	health := &server.Health{}
	if _, err := server.Serve(ctx, server.HTTPOptions{Addr: o.httpEndpoint, Registry: reg, Health: health, Pprof: o.pprof}); err != nil {
		return err
	}
	conn, err := tcsi.Connect(ctx, tcsi.Options{Address: o.csiAddress, Timeout: o.timeout, Registerer: reg})
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.RequireProvisioning(); err != nil {
		return err
	}
	driver := conn.DriverName()
	caps := conn.Capabilities()
	klog.FromContext(ctx).Info("CSI driver ready", "driver", driver, "capabilities", fmt.Sprintf("%+v", caps))
	// A driver that restarts with another name or other capabilities (or
	// cannot be read again) ends the process, which starts again on what
	// the driver now offers.
	ctx, driverChanged := context.WithCancelCause(ctx)
	defer driverChanged(nil)
	go func() {
		if err := conn.Watch(ctx); err != nil {
			driverChanged(err)
		}
	}()

	cfg, err := o.kube.RestConfig("tether-provisioner")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if o.orphans.Policy == provisioner.OrphanDelete {
		// Mark new volumes as this cluster's: the sweep deletes no others.
		if o.request.Owner, err = clusterID(ctx, client, o.clusterID); err != nil {
			return err
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	claimInf := factory.Core().V1().PersistentVolumeClaims()
	volumeInf := factory.Core().V1().PersistentVolumes()
	classInf := factory.Storage().V1().StorageClasses()
	nodeInf := factory.Core().V1().Nodes()
	csiNodeInf := factory.Storage().V1().CSINodes()
	vaInf := factory.Storage().V1().VolumeAttachments()

	host, _ := os.Hostname()
	popts := provisioner.Options{
		Client: client, Driver: conn, Request: o.request,
		Topology: caps.AccessibilityConstraints, StrictTopology: o.strictTopology, ImmediateTopology: o.immediateTopo,
		Clone: caps.Clone, GetCapacity: caps.GetCapacity,
		Identity: fmt.Sprintf("%d-%s-%s", time.Now().UnixMilli(), uuid.NewString()[:8], driver),
		Claims:   claimInf.Lister(), Volumes: volumeInf.Lister(), Classes: classInf.Lister(), Nodes: nodeInf.Lister(), CSINodes: csiNodeInf.Lister(),
		VolumeAttachments: vaInf.Lister(),
	}
	managedBy := "tether-provisioner"
	if o.nodeDeployment {
		o.node.NodeName = os.Getenv("NODE_NAME")
		popts.Node = &o.node
		managedBy += "-" + o.node.NodeName
	}
	var publisher *capacity.Publisher
	if o.capacity {
		if !caps.GetCapacity {
			return fmt.Errorf("--enable-capacity: the driver %s does not offer GET_CAPACITY", driver)
		}
		owner, err := capacityOwner(ctx, client, os.Getenv("NAMESPACE"), os.Getenv("POD_NAME"), o.capacityOwnerLevel)
		if err != nil {
			return err
		}
		publisher, err = capacity.New(capacity.Options{
			Client: client, Driver: conn, Namespace: os.Getenv("NAMESPACE"), Owner: owner, ManagedBy: managedBy,
			Segments: segmentsFunc(driver, popts.Node, csiNodeInf.Lister(), nodeInf.Lister()),
			Classes:  classInf.Lister(), ImmediateBinding: o.capacityImmediate, PollInterval: o.capacityPoll,
			DriverParams: func(params map[string]string) (map[string]string, error) {
				p, err := provisioner.ParseClassParams(params)
				return p.Driver, err
			},
		})
		if err != nil {
			return err
		}
		popts.Changed = publisher.VolumeChanged
	}
	prov, err := provisioner.New(popts)
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: driver + "_" + host})
	var sweeper *provisioner.Sweeper
	if caps.ListVolumes && o.orphans.Interval > 0 {
		o.orphans.Registerer, o.orphans.Recorder = reg, recorder
		o.orphans.Claims, o.orphans.Volumes = claimInf.Lister(), volumeInf.Lister()
		if sweeper, err = prov.NewSweeper(o.orphans); err != nil {
			return err
		}
	}
	inflight, err := prov.NewInFlight(provisioner.InFlightOptions{
		Claims: claimInf.Informer(), Volumes: volumeInf.Informer(), Classes: classInf.Lister(), Recorder: recorder,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.retryStart, o.retryMax),
	})
	if err != nil {
		return err
	}
	var cloneProtection *provisioner.CloneProtection
	if caps.Clone {
		cloneProtection, err = provisioner.NewCloneProtection(provisioner.CloneProtectionOptions{Client: client, Claims: claimInf.Informer(),
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.retryStart, o.retryMax)})
		if err != nil {
			return err
		}
	}
	for _, c := range []prometheus.Collector{libmetrics.M.PersistentVolumeClaimProvisionTotal, libmetrics.M.PersistentVolumeClaimProvisionFailedTotal,
		libmetrics.M.PersistentVolumeClaimProvisionDurationSeconds, libmetrics.M.PersistentVolumeDeleteTotal,
		libmetrics.M.PersistentVolumeDeleteFailedTotal, libmetrics.M.PersistentVolumeDeleteDurationSeconds} {
		reg.MustRegister(c)
	}
	lib := controller.NewProvisionController(client, driver, prov,
		controller.LeaderElection(false), // ours is below, on a Lease
		controller.Threadiness(int(o.workers)),
		controller.RateLimiter(workqueue.NewItemExponentialFailureRateLimiter(o.retryStart, o.retryMax)),
		controller.CreateProvisionedPVLimiter(workqueue.DefaultControllerRateLimiter()),
		// Retry for ever, with backoff, as external-provisioner does (the
		// library's default gives up after 15 failures).
		controller.FailedProvisionThreshold(0),
		controller.FailedDeleteThreshold(0),
		controller.ClaimsInformer(provisioner.QuietClaims(claimInf.Informer())),
		controller.VolumesInformer(volumeInf.Informer()),
		controller.ClassesInformer(classInf.Informer()),
		controller.NodesLister(nodeInf.Lister()),
		controller.AddFinalizer(true),
	)
	if o.leader.Name == "" {
		// As external-provisioner: the lease is named after the driver; in
		// node-deployment mode, after the driver and the node, so that the
		// replicas on one node elect a leader among themselves.
		lease := driver
		if o.nodeDeployment {
			lease += "-" + o.node.NodeName
		}
		o.leader.Name = strings.Trim(nonName.ReplaceAllString(strings.ToLower(lease), "-"), "-")
	}
	err = server.RunElected(ctx, client, o.leader, health, func(ctx context.Context) error {
		factory.Start(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), claimInf.Informer().HasSynced, volumeInf.Informer().HasSynced,
			classInf.Informer().HasSynced, nodeInf.Informer().HasSynced, csiNodeInf.Informer().HasSynced, vaInf.Informer().HasSynced) {
			return nil // ctx ended
		}
		go lib.Run(ctx) // it never returns; the process ends with ctx
		go inflight.Run(ctx, 4)
		if cloneProtection != nil {
			go cloneProtection.Run(ctx, 2)
		}
		if sweeper != nil {
			go sweeper.Run(ctx)
		}
		if publisher != nil {
			_, _ = classInf.Informer().AddEventHandler(publisher.ClassHandler())
			_, _ = csiNodeInf.Informer().AddEventHandler(publisher.CSINodeHandler())
			go publisher.Run(ctx)
		}
		klog.FromContext(ctx).Info("Provisioner started", "driver", driver, "workers", o.workers)
		<-ctx.Done()
		return nil
	})
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}
