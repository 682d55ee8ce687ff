package provisioner

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/nodeloss"
)

// FinalizerInFlight on a claim records durably that a backend volume may
// exist for it and no PV tracks it yet (see package inflight). It is added
// before the first CreateVolume and removed once the PV is saved (by the
// binder, in its bind write, or by the InFlight reconciler), or once the
// volume is known not to exist or is deleted (the clean-up of a claim that
// is deleted or will never use it). A failed CreateVolume leaves it: an
// earlier call may have made the volume. While it is there, the claim
// cannot vanish, so a restarted provisioner always finds the claim, and
// through the volume's name (prefix-<claim UID>, CreateVolume being
// idempotent by name) the volume.
const FinalizerInFlight = inflight.Finalizer

// InFlightOptions configure the in-flight reconciler.
type InFlightOptions struct {
	Claims   cache.SharedIndexInformer
	Volumes  cache.SharedIndexInformer
	Classes  storagelisters.StorageClassLister
	Recorder record.EventRecorder
	// RateLimiter paces retries (--retry-interval-start and -max).
	RateLimiter workqueue.TypedRateLimiter[string]
	// Queue, if set, is the work queue of claim keys the informers' events
	// feed and Run works (RateLimiter is then unused); nil makes one.
	Queue workqueue.TypedRateLimitingInterface[string]
	// Registerer, if set, takes the abandoned-volume counter.
	Registerer prometheus.Registerer
	// Abandoned, if set, is told of each volume whose clean-up can never
	// complete (the orphan sweep's report list: sweep.Sweeper.Abandoned).
	Abandoned func(name, reason string)
	// Nodes, if set, is the node informer whose events time a record's
	// node's loss (without it, the reconciler's own reads do).
	Nodes cache.SharedIndexInformer
	// NodeLossGrace is how long a record's node must be lost (deleted, or
	// tainted out-of-service) before another node's provisioner drops the
	// record, as the binder waits before it releases a claim
	// (--node-loss-grace); 0 is nodeloss.DefaultGrace.
	NodeLossGrace time.Duration
}

// InFlight settles the claims that carry FinalizerInFlight: once a claim's
// PV is saved, the record goes; once a claim is deleted before its PV was
// saved, the volume that may exist is found again by name (CreateVolume is
// idempotent), deleted, and then the record goes. This closes
// external-provisioner's leak when it restarts mid-CreateVolume (EP#486)
// and its create/delete race (EP#1469).
type InFlight struct {
	p         *Provisioner
	o         InFlightOptions
	queue     workqueue.TypedRateLimitingInterface[string]
	handBack  bool
	abandoned prometheus.Counter
	lost      *nodeloss.Tracker
}

// NewInFlight wires the reconciler to the informers.
func (p *Provisioner) NewInFlight(o InFlightOptions) (*InFlight, error) {
	queue := o.Queue
	if queue == nil {
		queue = workqueue.NewTypedRateLimitingQueueWithConfig(o.RateLimiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "in-flight"})
	}
	r := &InFlight{p: p, o: o, queue: queue,
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_provisioner_abandoned_volumes_total",
			Help: "Volumes made for a claim and never saved in a PV whose clean-up could never complete (their class or secret is gone for good, or the driver does not say their handle); each is reported in a VolumeCleanupAbandoned event on its StorageClass or CSIDriver."}),
	}
	if r.o.NodeLossGrace <= 0 {
		r.o.NodeLossGrace = nodeloss.DefaultGrace
	}
	r.lost = nodeloss.NewTracker(func() time.Time { return p.now() }, 2*r.o.NodeLossGrace)
	if o.Nodes != nil {
		if _, err := o.Nodes.AddEventHandler(r.nodeHandler()); err != nil {
			return nil, err
		}
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(r.abandoned); err != nil {
			return nil, err
		}
	}
	onClaim := func(obj any) {
		if c, ok := obj.(*v1.PersistentVolumeClaim); ok && slices.Contains(c.Finalizers, FinalizerInFlight) {
			r.queue.Add(c.Namespace + "/" + c.Name)
		}
	}
	if _, err := o.Claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onClaim, UpdateFunc: func(_, obj any) { onClaim(obj) },
	}); err != nil {
		return nil, err
	}
	onVolume := func(obj any) {
		if pv, ok := obj.(*v1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
			r.queue.Add(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
		}
	}
	if _, err := o.Volumes.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onVolume}); err != nil {
		return nil, err
	}
	return r, nil
}

// nodeHandler tells the tracker what the node events say.
func (r *InFlight) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				r.lost.Observe(n.Name, n)
			}
		},
		UpdateFunc: func(_, obj any) {
			if n, ok := obj.(*v1.Node); ok {
				r.lost.Observe(n.Name, n)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*v1.Node); ok {
				r.lost.Observe(n.Name, nil)
			}
		},
	}
}
