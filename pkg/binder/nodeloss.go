package binder

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

// The binder releases the claims of a class that opts in
// (nodeloss.AnnPolicy) whose volume's one node is lost for longer than
// the grace: the steps are nodeloss.Decide's, each taken in a sync of the
// PV, the writes in nodeloss_apply.go. It is the binder's work because
// the binder sees every claim, PV and node of the cluster, and one of
// them leads at a time (docs/design.md, "Node loss").

// nodeLoss is the binder's state for it.
type nodeLoss struct {
	grace    time.Duration
	tracker  *nodeloss.Tracker
	released *prometheus.CounterVec
}

func newNodeLoss(grace time.Duration, now func() time.Time, reg prometheus.Registerer) *nodeLoss {
	if grace <= 0 {
		grace = nodeloss.DefaultGrace
	}
	n := &nodeLoss{grace: grace, tracker: nodeloss.NewTracker(now, 2*grace),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_binder_volumes_released_for_node_loss_total",
			Help: "Volumes whose claim the binder released because their node was lost (deleted, or tainted node.kubernetes.io/out-of-service) for longer than --node-loss-grace, in a class with " + nodeloss.AnnPolicy + ", by the PV's reclaim policy (Delete: the PV is deleted; Retain: it is kept Released).",
		}, []string{"reclaim_policy"})}
	// Both series from the start, at 0: the family is served before the
	// first release (and an increase from nothing is seen as one).
	for _, p := range []v1.PersistentVolumeReclaimPolicy{v1.PersistentVolumeReclaimDelete, v1.PersistentVolumeReclaimRetain} {
		n.released.WithLabelValues(string(p))
	}
	if reg != nil {
		reg.MustRegister(n.released)
	}
	return n
}

// watchNodes registers the node handler; its first list counts in Synced,
// so no PV is decided on before the tracker knows every node.
func (c *Controller) watchNodes(nodes cache.SharedIndexInformer) error {
	reg, err := nodes.AddEventHandler(c.nodeHandler())
	if err != nil {
		return err
	}
	c.synced = append(c.synced, reg.HasSynced)
	return nil
}

// nodeHandler tells the tracker each node's state and, when a node's loss
// begins or ends, queues the PVs pinned to it or marked for it.
func (c *Controller) nodeHandler() cache.ResourceEventHandler {
	observe := func(name string, node, last *v1.Node) {
		if !c.nodeLoss.tracker.Observe(name, node) {
			return
		}
		lost := node == nil || nodeloss.OutOfServiceTaint(node) != nil
		c.handlerLog.V(2).Info("Node loss", "node", name, "lost", lost, "deleted", node == nil)
		// The PVs that may be pinned to it: by its name, or its hostname
		// label (its last state, for a deleted node).
		names := []string{name}
		if h := last.Labels[nodeloss.HostnameLabel]; h != "" && h != name {
			names = append(names, h)
		}
		for _, pv := range c.volumes.OfNode(names...) {
			mark := pv.Annotations[nodeloss.AnnLostNode]
			if mark == name || pv.Spec.NodeAffinity != nil && c.nodeLoss.tracker.Pinned(pv) == name {
				c.volumeQueue.Add(pv.Name)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				observe(n.Name, n, n)
			}
		},
		UpdateFunc: func(_, obj any) {
			if n, ok := obj.(*v1.Node); ok {
				observe(n.Name, n, n)
			}
		},
		DeleteFunc: func(obj any) {
			if n, ok := tombstoned(obj).(*v1.Node); ok {
				observe(n.Name, nil, n)
			}
		},
	}
}

// nodeLossUnderWay reports whether a PV may have a step of node loss to
// take: it carries marks, or it is pinned to a node the tracker knows
// lost. It is cheap (no node is walked): the first lists, the resyncs of
// settled pairs and a class's change ask it of every PV.
func (c *Controller) nodeLossUnderWay(pv *v1.PersistentVolume) bool {
	return nodeloss.Marked(pv) || c.nodeLoss.tracker.LostNode(pv) != ""
}

// queueNodeLossOfClass queues the PVs of a class whose node loss is under
// way: a class that opts in, or out, changes their next step.
func (c *Controller) queueNodeLossOfClass(class string) {
	for _, pv := range c.volumes.List() {
		if storagehelpers.GetPersistentVolumeClass(pv) == class && c.nodeLossUnderWay(pv) {
			c.volumeQueue.Add(pv.Name)
		}
	}
}

// keepOutOfService is the part of a node's spec the binder caches: its
// out-of-service taint, if any.
func keepOutOfService(n *v1.Node) v1.NodeSpec {
	if t := nodeloss.OutOfServiceTaint(n); t != nil {
		return v1.NodeSpec{Taints: []v1.Taint{*t}}
	}
	return v1.NodeSpec{}
}

// syncNodeLoss takes the next step of a PV's release for node loss, if
// any. claim is the claim its claimRef names (nil when gone).
func (c *Controller) syncNodeLoss(ctx context.Context, name string, claim *v1.PersistentVolumeClaim) error {
	pv, ok := c.volumes.Get(name)
	if !ok || !c.nodeLossUnderWay(pv) {
		return nil // the usual case: no marks, and its node, if it has one, is not lost
	}
	if claim != nil && (pv.Spec.ClaimRef == nil || claim.UID != pv.Spec.ClaimRef.UID) {
		claim = nil
	}
	in := nodeloss.Input{PV: pv, Claim: claim, Now: c.now(), Grace: c.nodeLoss.grace}
	if class, err := c.classLister.Get(storagehelpers.GetPersistentVolumeClass(pv)); err == nil {
		in.Policy = nodeloss.Policy(class)
	}
	mark := pv.Annotations[nodeloss.AnnLostNode]
	if pinned := c.nodeLoss.tracker.Pinned(pv); pinned != "" {
		var err error
		if in.Node, err = c.nodeState(ctx, pinned, pinned == mark); err != nil {
			return err
		}
	}
	step := nodeloss.Decide(in)
	if step.Op != nodeloss.Nothing && step.Op != nodeloss.WaitGrace {
		klog.FromContext(ctx).V(2).Info("Node loss", "step", step.Op.String(), "node", in.Node.Name, "mark", mark,
			"loss", in.Node.Loss, "policy", in.Policy)
	}
	return c.applyNodeLoss(ctx, in, step)
}

// nodeState is what the tracker knows of a node. A node no event showed
// is asked of the API server when ask (a PV's marks name it: it may have
// been deleted before this binder started, or forgotten since); else it
// is taken as not lost.
func (c *Controller) nodeState(ctx context.Context, name string, ask bool) (nodeloss.Node, error) {
	if st, known := c.nodeLoss.tracker.Get(name); known || !ask {
		return st, nil
	}
	node, err := c.opts.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		node = nil
	case err != nil:
		return nodeloss.Node{}, err
	}
	c.nodeLoss.tracker.Observe(name, node)
	st, _ := c.nodeLoss.tracker.Get(name)
	return st, nil
}

// lostOnServer reports whether the API server says a node is lost now
// (deleted, or tainted out-of-service): a claim is released, and
// deleted, on its word, not the cache's. The tracker takes in what it
// said: a node seen back ends its loss, even if its informer had not
// shown it yet.
func (c *Controller) lostOnServer(ctx context.Context, name string) (bool, error) {
	node, err := c.opts.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		node = nil
	case err != nil:
		return false, err
	}
	c.nodeLoss.tracker.Observe(name, node)
	return node == nil || nodeloss.OutOfServiceTaint(node) != nil, nil
}
