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
func QuietClaims(inf cache.SharedIndexInformer) cache.SharedIndexInformer {
	return quietInformer{inf}
}

type quietInformer struct{ cache.SharedIndexInformer }

func (i quietInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(quietHandler{h})
}

func (i quietInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(quietHandler{h}, resync)
}

func (i quietInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(quietHandler{h}, o)
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
