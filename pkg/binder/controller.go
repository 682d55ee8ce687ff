package binder

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// EventSource is the component name on the binder's events. It is
// kube-controller-manager's, so that tools filtering on it keep working.
const EventSource = "persistentvolume-controller"

// Options configure a Controller.
type Options struct {
	Client kubernetes.Interface
	// Workers is the number of claim workers, and of volume workers.
	Workers int
	// ResyncPeriod re-syncs every claim and volume this often, as
	// kube-controller-manager's --pvclaimbinder-sync-period does.
	ResyncPeriod time.Duration
	// Registerer receives the metrics; nil for none.
	Registerer prometheus.Registerer
	// Recorder records events; nil makes one that writes to the API.
	Recorder record.EventRecorder
	// NodeLossGrace is how long a node must be lost before the claims of
	// its volumes are released, in classes that opt in (nodeloss.AnnPolicy);
	// 0 is nodeloss.DefaultGrace.
	NodeLossGrace time.Duration
	// Inputs, when set, are the caches and queues the Controller runs on,
	// instead of the informers and queues New makes from Client; Start and
	// Run then start no informer (they are the caller's). Nil in
	// production.
	Inputs *Inputs
	// Clock is the time (nil: time.Now); node loss times its grace with it.
	Clock func() time.Time
	// KeepRecords leaves the provisioner's in-flight record on the claims
	// the binder binds, as kube-controller-manager's binder does; tether's
	// binder drops it in its bind write (false).
	KeepRecords bool
	// PatchAll, when set and true, has every write of a claim or PV be a
	// merge patch: the API server is newer than the binder's API types and
	// may hold fields an update would drop (server.Skew). Nil: only cut
	// objects are patched (patch.go).
	PatchAll func() bool
}

// Inputs are what a Controller runs on in place of its own informers and
// queues: the claim, volume and class informers (New registers the
// handlers that fill the Store and the Index on them), the node lister and
// whether it has synced, the node informer whose events feed the node-loss
// tracker (nil for none), and the claim and volume queues that the
// handlers fill and the syncs drain. The deterministic simulator (test/sim)
// delivers these itself, one step at a time.
type Inputs struct {
	Claims, Volumes, Classes cache.SharedIndexInformer
	Nodes                    corelisters.NodeLister
	NodesSynced              cache.InformerSynced
	NodeEvents               cache.SharedIndexInformer
	ClaimQueue, VolumeQueue  workqueue.TypedRateLimitingInterface[string]
}

// Controller runs the binder.
type Controller struct {
	opts Options
	// factory makes the informers; nil with Options.Inputs.
	factory     informers.SharedInformerFactory
	claims      *Store[*v1.PersistentVolumeClaim]
	volumes     *Index
	classLister storagelisters.StorageClassLister
	nodeLister  corelisters.NodeLister
	claimQueue  workqueue.TypedRateLimitingInterface[string]
	volumeQueue workqueue.TypedRateLimitingInterface[string]
	writer      *Writer
	metrics     *Metrics
	pending     *pendingClaims
	gone        goneClaims
	nodeLoss    *nodeLoss
	// now is the clock (the simulator sets it).
	now func() time.Time
	// synced are the node informer's HasSynced and the handler
	// registrations' (see New).
	synced      []cache.InformerSynced
	broadcaster record.EventBroadcaster
	// started makes Start's informers start once: on Start's context (a
	// standby warming its caches), or on Run's.
	started sync.Once
	// queuedFirst makes queueFirstLists run once.
	queuedFirst sync.Once
	// leading is true while Run's workers run: only then are the gauges
	// computed from the caches served (a standby's would repeat the
	// leader's).
	leading atomic.Bool
	// handlerLog is the logger of the informers' handlers: the context's
	// that started them (none in the simulator).
	handlerLog klog.Logger
	// beforeVolumeEvent, when set (by tests), runs at the start of every
	// volume event the handler gets: a slow handler.
	beforeVolumeEvent func()
	// startedAt is when New made the Controller: a foreign binder's write
	// counts only after it (foreign.go).
	startedAt time.Time
}

// New builds a Controller; Run starts it.
func New(opts Options) (*Controller, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("binder: no client")
	}
	if opts.Workers < 1 {
		return nil, fmt.Errorf("binder: workers must be at least 1, got %d", opts.Workers)
	}
	in := opts.Inputs
	if in != nil && (in.Claims == nil || in.Volumes == nil || in.Classes == nil || in.Nodes == nil ||
		in.NodesSynced == nil || in.ClaimQueue == nil || in.VolumeQueue == nil) {
		return nil, fmt.Errorf("binder: inputs lack an informer, the node lister, NodesSynced or a queue")
	}
	c := &Controller{
		opts:    opts,
		claims:  NewStore[*v1.PersistentVolumeClaim](),
		volumes: NewIndex(),
		pending: newPendingClaims(),
		now:     time.Now,
	}
	if opts.Clock != nil {
		c.now = opts.Clock
	}
	c.startedAt = c.now()
	if in != nil {
		c.claimQueue, c.volumeQueue = in.ClaimQueue, in.VolumeQueue
	} else {
		c.factory = informers.NewSharedInformerFactoryWithOptions(opts.Client, opts.ResyncPeriod,
			informers.WithTransform(c.transform))
		c.claimQueue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "claims"})
		c.volumeQueue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "volumes"})
	}
	c.metrics = NewMetrics(opts.Registerer, c.volumes, c.claims)
	c.metrics.collector.serving = c.leading.Load
	c.nodeLoss = newNodeLoss(opts.NodeLossGrace, func() time.Time { return c.now() }, opts.Registerer)
	recorder := opts.Recorder
	if recorder == nil {
		c.broadcaster = record.NewBroadcaster()
		recorder = c.broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: EventSource})
	}
	c.writer = &Writer{Client: opts.Client, Recorder: recorder, Volumes: c.volumes, Claims: c.claims, Metrics: c.metrics,
		keepRecords: opts.KeepRecords, patchAll: opts.PatchAll}

	if in != nil {
		c.classLister, c.nodeLister = storagelisters.NewStorageClassLister(in.Classes.GetIndexer()), in.Nodes
		if err := c.watch(in.Claims, in.Volumes, in.Classes, in.NodesSynced); err != nil {
			return nil, err
		}
		if in.NodeEvents != nil {
			if err := c.watchNodes(in.NodeEvents); err != nil {
				return nil, err
			}
		}
		return c, nil
	}
	classInf := c.factory.Storage().V1().StorageClasses()
	nodeInf := c.factory.Core().V1().Nodes()
	c.classLister, c.nodeLister = classInf.Lister(), nodeInf.Lister()
	if err := c.watch(claimInformer(c.factory), volumeInformer(c.factory), classInf.Informer(), nodeInf.Informer().HasSynced); err != nil {
		return nil, err
	}
	if err := c.watchNodes(nodeInf.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// watch registers the handlers that fill the Store and the Index on the
// claim, volume and class informers. The workers decide on the Store and
// the Index: they start once each handler has been handed every object of
// its informer's first list (the registration's HasSynced), not once the
// informer has merely read them (its own HasSynced). Otherwise a claim
// could be decided on before its matching volume is indexed (and be
// provisioned a new one), or a bound volume before its claim is stored.
// The node informer has no handler: its lister is read, once it has synced.
func (c *Controller) watch(claims, volumes, classes cache.SharedIndexInformer, nodesSynced cache.InformerSynced) error {
	c.synced = []cache.InformerSynced{nodesSynced}
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
	}{
		{claims, c.claimHandler()},
		{volumes, c.volumeHandler()},
		{classes, c.classHandler()},
	} {
		reg, err := h.inf.AddEventHandler(h.handler)
		if err != nil {
			return err
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return nil
}

// transform notices another binder's write on a claim or PV, while the
// whole object is at hand (noticeForeign), then trims it as the
// package's transform does.
func (c *Controller) transform(obj any) (any, error) {
	c.noticeForeign(obj)
	return transform(obj)
}

// transform trims what the informers cache. Of a node the binder needs only
// the labels (a volume's node affinity is matched against them) and its
// out-of-service taint (node loss), so it keeps the name, UID,
// resourceVersion, labels and that taint and drops the rest, status
// included; claims and PVs it slims (slim.go); of other objects it drops
// the managed fields.
func transform(obj any) (any, error) {
	if n, ok := obj.(*v1.Node); ok {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels,
		}, Spec: keepOutOfService(n)}, nil
	}
	return slimTransform(obj)
}

// Start starts the informers on ctx and returns: their handlers fill the
// caches (and queue what changes after the first lists), and nothing is
// written. A replica standing
// by for the lease calls it, so that it leads with its caches already
// synced instead of listing every claim and volume then (12 s at 100,000
// pairs). Calling it again, or Run after it, starts nothing twice. The
// informers stop when ctx ends. With Options.Inputs it starts none: they
// are the caller's.
func (c *Controller) Start(ctx context.Context) {
	c.started.Do(func() {
		c.handlerLog = klog.FromContext(ctx)
		if c.factory != nil {
			c.factory.Start(ctx.Done())
		}
		go func() {
			if cache.WaitForCacheSync(ctx.Done(), c.synced...) {
				klog.FromContext(ctx).Info("Caches synced", "volumes", c.volumes.Len())
			}
		}()
	})
}

// Run starts the informers, unless Start did, waits for the caches, and
// runs the workers until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	defer c.claimQueue.ShutDown()
	defer c.volumeQueue.ShutDown()
	if c.broadcaster != nil {
		c.broadcaster.StartStructuredLogging(3)
		c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.opts.Client.CoreV1().Events("")})
		defer c.broadcaster.Shutdown()
	}
	ownInformers := false
	c.started.Do(func() {
		c.handlerLog = logger
		if c.factory != nil {
			c.factory.Start(ctx.Done())
			ownInformers = true
		}
	})
	if ownInformers {
		// Started on ctx: they stop with it, and Run waits for them.
		defer c.factory.Shutdown()
	}
	// WaitForCacheSync returns false only once ctx ended: told to stop
	// while the caches fill (a big cluster takes seconds to list) is a
	// normal stop, neither an error nor its log (client-go's
	// WaitForNamedCacheSync logs one).
	logger.Info("Waiting for the caches to sync", "warm", !ownInformers)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		logger.Info("Binder stopped before its caches synced")
		return nil
	}
	c.QueueFirstLists()
	logger.Info("Binder started", "workers", c.opts.Workers, "volumes", c.volumes.Len(),
		"queued", c.claimQueue.Len()+c.volumeQueue.Len())
	c.leading.Store(true)
	defer c.leading.Store(false)
	done := make(chan struct{})
	for range c.opts.Workers {
		go c.work(ctx, "claim", c.claimQueue, c.SyncClaim, done)
		go c.work(ctx, "volume", c.volumeQueue, c.SyncVolume, done)
	}
	<-ctx.Done()
	c.claimQueue.ShutDown()
	c.volumeQueue.ShutDown()
	for range 2 * c.opts.Workers {
		<-done
	}
	logger.Info("Binder stopped")
	return nil
}

func (c *Controller) work(ctx context.Context, kind string, q workqueue.TypedRateLimitingInterface[string],
	sync func(context.Context, string) error, done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		err := sync(ctx, key)
		if err == nil {
			q.Forget(key)
		} else if ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Sync failed; will retry", "kind", kind, "key", key, "retries", q.NumRequeues(key))
			q.AddRateLimited(key)
		}
		q.Done(key)
	}
}

// Claims gives read access to the claim cache, for tests and metrics.
func (c *Controller) Claims() *Store[*v1.PersistentVolumeClaim] { return c.claims }

// Volumes gives read access to the volume index, for tests and metrics.
func (c *Controller) Volumes() *Index { return c.volumes }
