package provisioner

import (
	"context"

	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/inflight"
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

// recordInFlight adds the record for the claim's volume (name) and, in
// node-deployment mode, this node. The write carries the resourceVersion
// of the claim the decision was made on, so a claim that changed meanwhile
// (deleted, or bound elsewhere) fails it with a conflict and the library
// tries again on the fresh claim: no extra read is needed (and no
// finalizer can be added to a claim being deleted).
func (p *Provisioner) recordInFlight(ctx context.Context, claim *v1.PersistentVolumeClaim, name string) (*v1.PersistentVolumeClaim, error) {
	c := claim.DeepCopy()
	changed := inflight.Record(c, p.o.Driver.DriverName(), name)
	if p.o.Node != nil && c.Annotations[inflight.AnnNode] != p.o.Node.NodeName {
		c.Annotations[inflight.AnnNode] = p.o.Node.NodeName
		changed = true
	}
	for _, old := range []string{inflight.AnnSource, inflight.AnnSnapshot} {
		if _, ok := c.Annotations[old]; ok {
			delete(c.Annotations, old) // an earlier version's, trusted no more
			changed = true
		}
	}
	if !changed {
		return claim, nil
	}
	out, err := p.o.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("recording the volume in flight on the claim: %w", err)
	}
	return out, nil
}

// recordedElsewhere, in node-deployment mode, is the other node whose
// provisioner holds the claim's record ("" for none): its local volume
// must be cleaned up before this node makes one.
func (p *Provisioner) recordedElsewhere(claim *v1.PersistentVolumeClaim) string {
	if p.o.Node == nil || !inflight.Holds(claim) {
		return ""
	}
	if node := claim.Annotations[inflight.AnnNode]; node != "" && node != p.o.Node.NodeName {
		return node
	}
	return ""
}

// forgetInFlight removes the record: first with one write on the claim as
// given (usually current), then, on a conflict, from fresh reads of the
// same claim (same UID: a claim re-created under the name keeps its own).
func (p *Provisioner) forgetInFlight(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	c := claim.DeepCopy()
	if !inflight.Forget(c) {
		return nil
	}
	_, err := p.o.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return updateClaim(ctx, p.o.Client, claim.Namespace, claim.Name, func(c *v1.PersistentVolumeClaim) bool {
		return c.UID == claim.UID && inflight.Forget(c)
	})
}

// updateClaim applies change to a fresh copy of a claim and writes it if
// change says so, retrying conflicts on fresh reads. A claim that is gone
// needs nothing.
func updateClaim(ctx context.Context, client kubernetes.Interface, namespace, name string, change func(*v1.PersistentVolumeClaim) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		claim, err := client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if !change(claim) {
			return nil
		}
		_, err = client.CoreV1().PersistentVolumeClaims(namespace).Update(ctx, claim, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// reschedule hands a claim back to the scheduler: it removes the selected
// node. The in-flight record stays: an earlier CreateVolume may have made
// the volume (one that timed out, then ResourceExhausted); in
// node-deployment mode the record's node cleans it up once the claim has
// moved. The library would remove the node from its cached claim, which
// our own writes have usually made stale, so we do it from a fresh read.
func (p *Provisioner) reschedule(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	return updateClaim(ctx, p.o.Client, claim.Namespace, claim.Name, func(c *v1.PersistentVolumeClaim) bool {
		if c.UID != claim.UID {
			return false
		}
		_, selected := c.Annotations[storagehelpers.AnnSelectedNode]
		delete(c.Annotations, storagehelpers.AnnSelectedNode)
		return selected
	})
}

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
