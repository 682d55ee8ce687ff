package main

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/tether-csi/tether/pkg/intern"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	"github.com/tether-csi/tether/pkg/provisioner/scope"
)

// gcPercent is the provisioner's GOGC unless the environment sets one, as
// the binder's: what its heap holds lives long (the claims it serves
// while they wait, the names of the rest), and at Go's default (100) the
// heap grows to twice that before a collection. In node-deployment mode
// at rest the heap is a few MiB, and RSS what the process itself needs
// (docs/performance.md, "Node-deployment mode at scale").
const gcPercent = 50

// caches are the informers the provisioner reads: the factory's (classes,
// nodes, CSINodes, VolumeAttachments, VolumeAttributesClasses), and the
// claims and PVs it answers for (package scope), each with its Keeper.
type caches struct {
	factory                   informers.SharedInformerFactory
	claims, volumes           cache.SharedIndexInformer
	claimLister               corelisters.PersistentVolumeClaimLister
	volumeLister              corelisters.PersistentVolumeLister
	claimKeeper, volumeKeeper *scope.Keeper
	nodes                     corelisters.NodeLister
	nodesSynced               cache.InformerSynced
	node                      string

	// In node-deployment mode, what lists the PVs again when this node's
	// labels narrow (relabel): the PV informer's ListerWatcher, the
	// spacing of its listings and its clock, the count of them, and the
	// recorder of its events on the node (none when nil).
	volumesLW *scope.ListerWatcher
	backoff   scope.RelistBackoff
	clock     clock.Clock
	relists   prometheus.Counter
	recorder  record.EventRecorder
}

// cacheOptions say what the caches keep: the driver's claims and PVs (and
// those of the in-tree plugin it took over, Migrated), the node's only in
// node-deployment mode (Node set), named as Request names volumes.
type cacheOptions struct {
	Driver, Migrated, Node string
	Request                request.Options
	// Behind makes the claims' and PVs' first listings run behind their
	// watches (scope.ListerWatcher.Behind): the provisioner serves new
	// claims before it has read the whole cluster.
	Behind bool
}

// newCaches builds the informers; nothing runs before start. Claims and
// PVs share the values many hold alike (intern); the ones kept are kept
// whole, since the library writes cached objects whole.
func newCaches(client kubernetes.Interface, o cacheOptions) *caches {
	in := &intern.Interner{}
	driver, node, req := o.Driver, o.Node, o.Request
	c := &caches{factory: informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(in.Transform)), node: node,
		backoff: scope.RelistBackoff{Min: relistMin, Max: relistMax}, clock: clock.RealClock{},
		relists: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_provisioner_volume_relists_total",
			Help: "Listings of the PVs again because this node's labels changed or were removed (node-deployment mode): a PV left out under the old labels may be this node's now. Each has a NodeLabelsChanged event on the node."})}
	nodeInf := c.factory.Core().V1().Nodes()
	c.nodes, c.nodesSynced = nodeInf.Lister(), nodeInf.Informer().HasSynced
	sc := scope.Scope{Driver: driver, Migrated: o.Migrated, Node: node, NodeLabels: c.nodeLabels}
	c.claimKeeper = sc.ClaimKeeper(func(uid string) string {
		return request.VolumeName(req.VolumeNamePrefix, uid, req.VolumeNameUUIDLen)
	})
	c.volumeKeeper = sc.VolumeKeeper()
	io := scope.InformerOptions{Transform: in.Transform, Behind: o.Behind}
	c.claims = scope.ClaimInformer(client, c.claimKeeper, io)
	// The PVs' listing behind the watch reads its rest once the claims'
	// has caught up: a claim that waits since before the start comes
	// with its listing alone, and is served the sooner.
	io.BehindAfter = c.claimKeeper.Seen().WaitListed
	c.volumes, c.volumesLW = scope.VolumeInformer(client, c.volumeKeeper, io)
	c.claimLister = corelisters.NewPersistentVolumeClaimLister(c.claims.GetIndexer())
	c.volumeLister = corelisters.NewPersistentVolumeLister(c.volumes.GetIndexer())
	return c
}

// register adds the gauges of what the caches hold (per resource, the
// objects kept whole, the names kept of all of them, and whether a
// listing runs behind the watch) and the counter of listings of the PVs
// again.
func (c *caches) register(reg prometheus.Registerer) error {
	if err := reg.Register(c.relists); err != nil {
		return err
	}
	for _, r := range []struct {
		resource string
		k        *scope.Keeper
	}{{"persistentvolumeclaims", c.claimKeeper}, {"persistentvolumes", c.volumeKeeper}} {
		k := r.k
		for _, g := range []prometheus.Collector{
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tether_provisioner_cached_objects", ConstLabels: prometheus.Labels{"resource": r.resource},
				Help: "Claims and PVs this provisioner keeps whole in its caches: the ones it answers for."},
				func() float64 { return float64(k.Held()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tether_provisioner_cached_names", ConstLabels: prometheus.Labels{"resource": r.resource},
				Help: "Names this provisioner keeps of every claim (the volume name it is provisioned under) and PV (its name and CSI handle), kept whole or not."},
				func() float64 { return float64(k.Seen().Len()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tether_provisioner_listing_behind", ConstLabels: prometheus.Labels{"resource": r.resource},
				Help: "1 while this provisioner's listing of the resource runs behind its watch (node-deployment mode, after a start): it serves, but does not know every name yet, so no orphan sweep runs; 0 otherwise."},
				func() float64 {
					if k.Seen().Complete() {
						return 0
					}
					return 1
				}),
		} {
			if err := reg.Register(g); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodeLabels are this node's labels, once the node informer has them.
func (c *caches) nodeLabels() (map[string]string, bool) {
	n, err := c.nodes.Get(c.node)
	if err != nil {
		return nil, false
	}
	return n.Labels, true
}

// start runs the informers until ctx ends. In node-deployment mode the
// nodes come first: which PVs are this node's is read from its labels,
// and a later change of them that may matter (from the labels last seen,
// across a deletion of the node too) makes the PV informer list again
// (relabel), while everything else runs on.
func (c *caches) start(ctx context.Context) {
	c.factory.Start(ctx.Done())
	if c.node != "" {
		if !cache.WaitForCacheSync(ctx.Done(), c.nodesSynced) {
			return
		}
		notice := relistNotice(c.node, nodeRef(func() (*v1.Node, error) { return c.nodes.Get(c.node) }, c.node), c.recorder, c.relists)
		r := newRelabel(c.clock, c.backoff, c.volumesLW.Relist, notice)
		go r.run(ctx)
		var (
			mu   sync.Mutex
			seen map[string]string
		)
		if labels, ok := c.nodeLabels(); ok {
			seen = labels
		}
		// The node lister holds a change before a handler hears of it, so
		// the listing it asks for reads the new labels.
		check := func(obj any) {
			n, ok := obj.(*v1.Node)
			if !ok || n.Name != c.node {
				return
			}
			mu.Lock()
			before := seen
			seen = n.Labels
			mu.Unlock()
			if keys := scope.NarrowedKeys(before, n.Labels); len(keys) > 0 {
				r.changed(keys)
			}
		}
		_, _ = c.factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { check(obj) },
			UpdateFunc: func(_, obj any) { check(obj) },
		})
	}
	go c.claims.RunWithContext(ctx)
	go c.volumes.RunWithContext(ctx)
}
