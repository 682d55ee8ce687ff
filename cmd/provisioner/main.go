package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
	libmetrics "sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller/metrics"

	"github.com/tether-csi/tether/internal/gogc"
	"github.com/tether-csi/tether/internal/version"
	"github.com/tether-csi/tether/pkg/capacity"
	tcsi "github.com/tether-csi/tether/pkg/csi"
	"github.com/tether-csi/tether/pkg/migration"
	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/pkg/provisioner/claimlock"
	"github.com/tether-csi/tether/pkg/provisioner/libv8"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	"github.com/tether-csi/tether/pkg/provisioner/records"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	"github.com/tether-csi/tether/pkg/provisioner/static"
	"github.com/tether-csi/tether/pkg/provisioner/sweep"
	"github.com/tether-csi/tether/pkg/server"
)

func main() {
	o, fs, status, exit := begin(os.Args, os.Getenv, os.Stdout, os.Stderr)
	if exit {
		os.Exit(status)
	}
	if err := applyLogging(o.compat.logging); err != nil {
		fmt.Fprintln(os.Stderr, "provisioner:", err)
		os.Exit(1)
	}
	gogc.Default(gcPercent, os.LookupEnv)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background().WithName("provisioner"))
	gogc.MemoryLimit(ctx, klog.FromContext(ctx), memlimit.FromCgroup)
	logger := klog.FromContext(ctx)
	logger.Info("Version", "version", version.String())
	if ignored := givenIgnored(fs); len(ignored) > 0 {
		logger.Info("Flags of external-provisioner accepted and ignored", "flags", ignored)
	}
	if err := run(ctx, o); err != nil {
		if server.StoppedEarly(ctx, err) {
			logger.Info("Stopped by a signal before it had started", "interrupted", err.Error())
			klog.Flush()
			return
		}
		klog.FromContext(ctx).Error(err, "Provisioner failed")
		klog.Flush()
		os.Exit(exitCode(err))
	}
	klog.Flush()
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

func run(ctx context.Context, o options) error {
	// What the command line and the environment get wrong was said by
	// checkOptions, before the CSI socket appears (which may be never).
	cfg, err := o.restConfig("tether-provisioner")
	if err != nil {
		return err
	}
	reg := server.NewRegistry()
	health := &server.Health{}
	guard, err := o.secure.NewGuard(cfg)
	if err != nil {
		return err
	}
	if _, err := server.Serve(ctx, server.HTTPOptions{Addr: o.endpoint(), MetricsPath: o.compat.metricsPath, Registry: reg, Health: health, Pprof: o.pprof,
		Secure: o.secure, Guard: guard}); err != nil {
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
	// /healthz fails while the driver does not answer Probe: in every
	// mode, and the only check in node-deployment mode without leader
	// election.
	health.AddCheck("csi", func(r *http.Request) error { return conn.Probe(r.Context()) })
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

	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if o.orphans.Policy == sweep.Delete {
		// Mark new volumes as this cluster's: the sweep deletes no others.
		if o.request.Owner, err = clusterID(ctx, client, o.clusterID); err != nil {
			return err
		}
	}
	// A driver that takes over an in-tree plugin (CSI migration) also
	// provisions the claims of that plugin's classes, as EP does.
	inTree, _ := migration.InTreeFor(driver)
	// The claims and PVs this provisioner answers for are cached whole,
	// the others by name only (package scope).
	var node string
	if o.nodeDeployment {
		node = o.node.NodeName
	}
	// A node's provisioner serves new claims while it reads the rest of
	// the cluster behind its watches (scope.ListerWatcher.Behind): a
	// driver's DaemonSet rolled restarts all of them at once. Not for
	// --hand-back, which reads every claim once.
	c := newCaches(client, cacheOptions{Driver: driver, Migrated: inTree, Node: node, Request: o.request,
		Behind: o.nodeDeployment && !o.handBack})
	factory := c.factory
	classInf := factory.Storage().V1().StorageClasses()
	nodeInf := factory.Core().V1().Nodes()
	csiNodeInf := factory.Storage().V1().CSINodes()

	_, _ = classInf.Informer().AddEventHandler(deprecatedParamsLogger(ctx, driver))
	if err := c.register(reg); err != nil {
		return err
	}
	if _, err := records.RegisterMetrics(reg, c.claims, driver, o.node.NodeName); err != nil {
		return err
	}
	if o.leader.Status, err = server.NewLeaderStatus(reg, "provisioner"); err != nil {
		return err
	}

	host, _ := os.Hostname()
	// The work under the lease: its CSI calls are counted, and refused once
	// it stops, so that none outlives the lease (see server.Work).
	work := &server.Work{}
	// The provisioner and the sweep share the driver (so that the sweep's
	// DeleteVolume is gated as well) and the per-claim locks.
	drv, locks := gatedDriver{Conn: conn, calls: &work.Calls}, &claimlock.Set{}
	popts := provisioner.Options{
		Client: client, Driver: drv, Locks: locks, Request: o.request,
		Topology: caps.AccessibilityConstraints, StrictTopology: o.strictTopology, ImmediateTopology: o.immediateTopo,
		Clone: caps.Clone, GetCapacity: caps.GetCapacity, PublishUnpublish: caps.PublishUnpublish,
		Identity: fmt.Sprintf("%d-%s-%s", time.Now().UnixMilli(), uuid.NewString()[:8], driver),
		Claims:   c.claimLister, Volumes: c.volumeLister, VolumeNames: c.volumeKeeper.Seen(), GoneClaims: c.claimKeeper.Gone(),
		Classes: classInf.Lister(), Nodes: nodeInf.Lister(), CSINodes: csiNodeInf.Lister(),
		ModifyVolume: caps.ModifyVolume, MigratedFrom: inTree,
	}
	// As external-provisioner: VolumeAttachments are watched (and a
	// deletion waits for the detach) only for a driver with
	// PUBLISH_UNPUBLISH_VOLUME.
	synced := []cache.InformerSynced{c.claims.HasSynced, c.volumes.HasSynced,
		classInf.Informer().HasSynced, nodeInf.Informer().HasSynced, csiNodeInf.Informer().HasSynced}
	var vaInf cache.SharedIndexInformer
	if caps.PublishUnpublish {
		vas := factory.Storage().V1().VolumeAttachments()
		vaInf, popts.VolumeAttachments = vas.Informer(), vas.Lister()
		synced = append(synced, vaInf.HasSynced)
	}
	popts.Request.SingleNodeMultiWriter = caps.SingleNodeMultiWriter
	// Restores from VolumeSnapshots, when the driver and the cluster can.
	snaps, err := newSnapshots(ctx, cfg, client.Discovery(), caps.Snapshots)
	if err != nil {
		return err
	}
	popts.Snapshots, popts.SnapshotClient = caps.Snapshots, snaps.Client()
	popts.PreventVolumeModeConversion = o.compat.preventModeConversion
	// VolumeAttributesClasses are read only for a driver with MODIFY_VOLUME
	// (without it a claim naming one is refused before the class is read),
	// and not waited for (see SyncedVACs).
	var vacInformer cache.SharedIndexInformer
	if caps.ModifyVolume {
		vacInf := factory.Storage().V1().VolumeAttributesClasses()
		popts.VolumeAttributesClasses = libv8.SyncedVACs(vacInf.Lister(), vacInf.Informer().HasSynced)
		vacInformer = vacInf.Informer()
	}
	// EP's label on its CSIStorageCapacity objects: tether takes over (updates
	// or deletes) the ones EP left, and EP those tether leaves.
	managedBy := "external-provisioner"
	if o.nodeDeployment {
		popts.Node = &o.node
		managedBy += "-" + o.node.NodeName
	}
	var publisher *capacity.Publisher
	if o.capacity && !caps.GetCapacity {
		// As external-provisioner v6.4.0, which runs on (its GetCapacity
		// calls then fail): no capacity is published, and the log says why
		// once.
		klog.FromContext(ctx).Info("Warning: --enable-capacity is set, but the driver does not offer GET_CAPACITY: no CSIStorageCapacity is published", "driver", driver)
	}
	if o.capacity && caps.GetCapacity {
		capacityClient, capacityCfg := kubernetes.Interface(client), cfg
		if ccfg := o.compat.capacityConfig(cfg); ccfg != nil {
			if capacityClient, err = kubernetes.NewForConfig(ccfg); err != nil {
				return err
			}
			capacityCfg = ccfg
		}
		owner, err := capacityOwner(ctx, capacityCfg, capacityClient, o.env.namespace, o.env.podName, o.capacityOwnerLevel)
		if err != nil {
			return err
		}
		if owner != nil {
			klog.FromContext(ctx).Info("Owner of the CSIStorageCapacity objects", "apiVersion", owner.APIVersion, "kind", owner.Kind, "name", owner.Name)
		}
		publisher, err = capacity.New(capacity.Options{
			Client: capacityClient, Driver: conn, Namespace: o.env.namespace, Owner: owner, ManagedBy: managedBy,
			Segments: segmentsFunc(driver, popts.Node, csiNodeInf.Lister(), nodeInf.Lister()),
			Classes:  classInf.Lister(), ImmediateBinding: o.capacityImmediate, PollInterval: o.capacityPoll,
			Threads: int(o.capacityThreads),
			DriverParams: func(params map[string]string) (map[string]string, error) {
				p, err := request.ParseClassParams(params)
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
	c.recorder = recorder
	var sweeper *sweep.Sweeper
	if caps.ListVolumes && o.orphans.Interval > 0 {
		o.orphans.Driver, o.orphans.Client, o.orphans.Request, o.orphans.Locks = drv, client, popts.Request, locks
		o.orphans.Registerer, o.orphans.Recorder = reg, recorder
		o.orphans.Claims, o.orphans.Volumes, o.orphans.VolumeEvents = c.claimLister, c.volumeLister, c.volumes
		o.orphans.ClaimNames, o.orphans.VolumeNames = c.claimKeeper.Seen(), c.volumeKeeper.Seen()
		o.orphans.SavePending = prov.SavePending
		if sweeper, err = sweep.New(ctx, o.orphans); err != nil {
			return err
		}
	}
	inflightOpts := provisioner.InFlightOptions{
		Claims: c.claims, Volumes: c.volumes, Classes: classInf.Lister(), Recorder: recorder,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.retryStart, o.retryMax),
		Registerer:  reg, Nodes: nodeInf.Informer(), NodeLossGrace: o.nodeLossGrace,
	}
	if sweeper != nil {
		// A volume whose clean-up can never complete stays on the sweep's
		// report list.
		inflightOpts.Abandoned = sweeper.Abandoned
	}
	inflight, err := prov.NewInFlight(inflightOpts)
	if err != nil {
		return err
	}
	static, err := static.New(static.Options{Client: client, Driver: driver, Deleter: prov, Volumes: c.volumes,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.retryStart, o.retryMax)})
	if err != nil {
		return err
	}
	var cloneProtection *protect.CloneProtection
	if caps.Clone {
		cloneProtection, err = protect.NewCloneProtection(protect.CloneProtectionOptions{Client: client, Claims: c.claims,
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.retryStart, o.retryMax)})
		if err != nil {
			return err
		}
	}
	if err := snaps.protect(client, c.claims, workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.retryStart, o.retryMax)); err != nil {
		return err
	}
	for _, c := range []prometheus.Collector{libmetrics.M.PersistentVolumeClaimProvisionTotal, libmetrics.M.PersistentVolumeClaimProvisionFailedTotal,
		libmetrics.M.PersistentVolumeClaimProvisionDurationSeconds, libmetrics.M.PersistentVolumeDeleteTotal,
		libmetrics.M.PersistentVolumeDeleteFailedTotal, libmetrics.M.PersistentVolumeDeleteDurationSeconds} {
		reg.MustRegister(c)
	}
	libVolumes := libv8.CopyingVolumes(c.volumes)
	if vaInf != nil {
		// A PV whose deletion waited for a detach goes back to the
		// library once detached.
		if err := prov.WatchDetach(provisioner.DetachOptions{VolumeAttachments: vaInf, Requeue: libVolumes.Requeue, Recorder: recorder}); err != nil {
			return err
		}
	}
	// A claim whose request the driver refused as infeasible waits for an
	// edit of itself or of its classes, and otherwise for
	// --retry-interval-max, as EP's slow retry does.
	libClaims := libv8.QuietClaims(c.claims)
	if err := prov.WaitInfeasible(provisioner.InfeasibleOptions{Interval: o.retryMax, Recorder: recorder, Registerer: reg,
		Requeue: func(key string, after time.Duration) { time.AfterFunc(after, func() { libClaims.Requeue(key) }) },
		Classes: classInf.Informer(), AttributesClasses: vacInformer}); err != nil {
		return err
	}
	libOpts := []func(*controller.ProvisionController) error{
		controller.LeaderElection(false), // ours is below, on a Lease
		controller.Threadiness(int(o.workers)),
		controller.RateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[any](o.retryStart, o.retryMax)),
		controller.CreateProvisionedPVLimiter(workqueue.DefaultTypedControllerRateLimiter[any]()),
		// Retry for ever, with backoff, as external-provisioner does (the
		// library's default gives up after 15 failures).
		controller.FailedProvisionThreshold(0),
		controller.FailedDeleteThreshold(0),
		controller.ClaimsInformer(libClaims),
		controller.VolumesInformer(libVolumes),
		controller.ClassesInformer(classInf.Informer()),
		controller.NodesLister(libv8.SelectedNodes(nodeInf.Lister())),
		controller.AddFinalizer(true),
	}
	if popts.MigratedFrom != "" {
		libOpts = append(libOpts, controller.AdditionalProvisionerNames([]string{popts.MigratedFrom}))
	}
	// The library's PV finalizer Updates go out as patches: EP's ClusterRole
	// grants patch, not update, on PVs.
	lib := controller.NewProvisionController(prov.LibraryClient(client), driver, gatedProvisioner{prov, &work.Calls}, libOpts...)
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
	if o.handBack {
		return handBack(ctx, c.start, inflight, synced...)
	}
	// A CSI call under way gets its whole timeout to end before the lease
	// is handed back.
	o.leader.DrainTimeout = max(o.leader.DrainTimeout, o.timeout+5*time.Second)
	err = server.RunElected(ctx, client, o.leader, health, work.Run(func(ctx context.Context) error {
		c.start(ctx)
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return nil // ctx ended
		}
		// The library's Run never returns and never stops its workers
		// (v8 ends it in select{}): its Provision and Delete calls are
		// refused once the work stops (gatedProvisioner), and those under
		// way are waited for; its goroutines end with the process.
		work.Go(func(ctx context.Context) {
			go lib.Run(ctx)
			<-ctx.Done()
		})
		work.Go(func(ctx context.Context) { inflight.Run(ctx, 4) })
		work.Go(func(ctx context.Context) { static.Run(ctx, 2) })
		if cloneProtection != nil {
			work.Go(func(ctx context.Context) { cloneProtection.Run(ctx, int(o.compat.cloningThreads)) })
		}
		work.Go(func(ctx context.Context) { snaps.run(ctx, int(o.compat.cloningThreads)) })
		if sweeper != nil {
			work.Go(sweeper.Run)
		}
		if publisher != nil {
			_, _ = classInf.Informer().AddEventHandler(publisher.ClassHandler())
			_, _ = csiNodeInf.Informer().AddEventHandler(publisher.CSINodeHandler())
			_, _ = nodeInf.Informer().AddEventHandler(topologyLabelHandler(driver, csiNodeInf.Lister(), publisher.Trigger))
			work.Go(publisher.Run)
		}
		klog.FromContext(ctx).Info("Provisioner started", "driver", driver, "workers", o.workers)
		return nil
	}))
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// errStopping refuses a CSI call once the work stops. Unavailable: the
// provisioner takes it as a call that may have started (it keeps the
// claim's in-flight record), and the next leader makes it.
var errStopping = status.Error(codes.Unavailable, "the provisioner is stopping: the call is left to the next leader")

// gatedDriver counts the CreateVolume and DeleteVolume calls in progress
// and refuses new ones once the work stops, whoever makes them (the
// library's Provision and Delete, the in-flight reconciler, the static
// volumes, the sweep). Its other calls are the connection's.
type gatedDriver struct {
	*tcsi.Conn
	calls *server.Calls
}

func (d gatedDriver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if !d.calls.Enter() {
		return nil, errStopping
	}
	defer d.calls.Leave()
	return d.Conn.CreateVolume(ctx, req)
}

func (d gatedDriver) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if !d.calls.Enter() {
		return nil, errStopping
	}
	defer d.calls.Leave()
	return d.Conn.DeleteVolume(ctx, req)
}

// gatedProvisioner is the provisioner as the library sees it: a Provision
// or Delete under way is waited for whole (the PV it returns is saved, the
// record it writes is written) before the lease is handed back, and none
// starts once the work stops. A refused one is "ignored" for the library:
// no event, no retry (the next leader's library takes the claim or volume
// up).
type gatedProvisioner struct {
	*provisioner.Provisioner
	calls *server.Calls
}

func (p gatedProvisioner) Provision(ctx context.Context, po controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	if !p.calls.Enter() {
		return nil, controller.ProvisioningNoChange, &controller.IgnoredError{Reason: "the provisioner is stopping"}
	}
	defer p.calls.Leave()
	return p.Provisioner.Provision(ctx, po)
}

func (p gatedProvisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	if !p.calls.Enter() {
		return &controller.IgnoredError{Reason: "the provisioner is stopping"}
	}
	defer p.calls.Leave()
	return p.Provisioner.Delete(ctx, pv)
}
