package libv8

import (
	"time"

	"github.com/tether-csi/tether/pkg/inflight"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"
)

// QuietClaims wraps the claim informer that the library's controller
// watches, so that its handlers do not see the updates that only add or
// remove FinalizerInFlight. The library queues a claim on every update,
// past its rate limiter: without this, our own writes of the in-flight
// record would start the next attempt at once, and a claim whose
// CreateVolume fails for good would be retried in a tight loop (a
// CreateVolume, two claim writes and an event every few milliseconds).
//
// It also keeps the handlers added through it (the library's), so that a
// claim can be handed back to the library without a change of the claim
// (Requeue).
func QuietClaims(inf cache.SharedIndexInformer) *Claims {
	return &Claims{SharedIndexInformer: inf}
}

// Claims is the claim informer as the library sees it (QuietClaims).
type Claims struct {
	cache.SharedIndexInformer
	kept handlers
}

func (i *Claims) keep(h cache.ResourceEventHandler) cache.ResourceEventHandler {
	return i.kept.add(quietHandler{h})
}

func (i *Claims) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(i.keep(h))
}

func (i *Claims) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(i.keep(h), resync)
}

func (i *Claims) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(i.keep(h), o)
}

// Requeue hands the claim of the key (namespace/name), as the store holds
// it, to the handlers added through i as an update without change: the
// library queues it and looks at it again (a claim whose wait for an edit
// is over). A claim not in the store is left alone.
func (i *Claims) Requeue(key string) {
	i.kept.requeue(i.SharedIndexInformer.GetStore(), key)
}

type quietHandler struct{ cache.ResourceEventHandler }

func (h quietHandler) OnUpdate(oldObj, newObj any) {
	if !onlyInFlightChanged(oldObj, newObj) {
		h.ResourceEventHandler.OnUpdate(oldObj, newObj)
	}
}

// onlyInFlightChanged reports whether a claim update added or removed the
// in-flight record and changed nothing else but the write's bookkeeping.
func onlyInFlightChanged(oldObj, newObj any) bool {
	o, ok := oldObj.(*v1.PersistentVolumeClaim)
	n, ok2 := newObj.(*v1.PersistentVolumeClaim)
	if !ok || !ok2 || inflight.Holds(o) == inflight.Holds(n) {
		return false
	}
	// The bind write removes the record too, with the volume's name: no
	// need to compare the rest.
	if o.Spec.VolumeName != n.Spec.VolumeName || o.Status.Phase != n.Status.Phase {
		return false
	}
	strip := func(c *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
		c = inflight.Strip(c) // a shallow copy
		c.ResourceVersion, c.ManagedFields = "", nil
		return c
	}
	return equality.Semantic.DeepEqual(strip(o), strip(n))
}
