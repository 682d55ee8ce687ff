package provisioner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/records"
	"github.com/tether-csi/tether/pkg/provisioner/worker"
)

// Run works the queue until ctx ends.
func (r *InFlight) Run(ctx context.Context, workers int) {
	worker.Run(ctx, r.queue, workers, "pvc", "Settling an in-flight volume; will retry", r.Reconcile)
}

// busyRetry is how soon a claim whose lock is held (a CreateVolume in
// progress) is looked at again.
const busyRetry = 2 * time.Second

// Reconcile settles the in-flight record of one claim (a namespace/name
// key): one worker step, which Run's workers call for each key of the
// queue. An error has the key retried with the rate limiter's backoff.
func (r *InFlight) Reconcile(ctx context.Context, key string) error {
	obj, exists, err := r.o.Claims.GetStore().GetByKey(key)
	if err != nil || !exists {
		return err
	}
	claim := obj.(*v1.PersistentVolumeClaim)
	p := r.p
	if !inflight.Holds(claim) {
		return nil
	}
	if driver, _, ok := inflight.Volume(claim); ok && driver != p.o.Driver.DriverName() {
		return nil // another driver's record
	}
	unlock, ok := p.locks.TryLock(string(claim.UID))
	if !ok {
		r.queue.AddAfter(key, busyRetry)
		return nil
	}
	defer unlock()
	logger := klog.FromContext(ctx).WithValues("pvc", klog.KObj(claim))
	ctx = klog.NewContext(ctx, logger)
	in, err := r.input(ctx, claim, false)
	if err != nil {
		return err
	}
	step := records.Decide(in)
	if step.Op == records.CleanUp {
		// A delete is decided on the API server's word, not the caches':
		// the claim read again (the same one, still holding the record) and
		// its PV read from the API.
		fresh, err := p.o.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && (fresh.UID != claim.UID || !inflight.Holds(fresh))) {
			return nil // gone, or the record is: nothing left to settle
		} else if err != nil {
			return err
		}
		claim = fresh
		if in, err = r.input(ctx, claim, true); err != nil {
			return err
		}
		step = records.Decide(in)
	}
	switch step.Op {
	case records.Keep:
		return nil
	case records.Leave:
		if in.Owner == records.OwnedHere {
			r.o.Recorder.Eventf(claim, v1.EventTypeWarning, "InFlightRecordUnread",
				"left the claim's in-flight record as it is: its format %q is not one this provisioner reads (1 to %d); a provisioner that reads it settles it (docs/upgrade.md)",
				claim.Annotations[inflight.AnnFormat], inflight.FormatRead)
		}
		return nil
	case records.Requeue:
		r.queue.AddAfter(key, step.Wait)
		return nil
	case records.DropNoneMade:
		logger.Info("Dropping the in-flight record without a driver call: every CreateVolume made for the claim answered that it made no volume",
			"volume", in.Volume, "deleting", claim.DeletionTimestamp != nil)
	case records.DropNodeGone:
		node := records.Node(claim)
		r.o.Recorder.Eventf(claim, v1.EventTypeWarning, "VolumeInFlightNodeGone",
			"the node %s is lost (deleted, or tainted %s) for longer than %s: its local volume %s is out of reach; dropping the in-flight record (if the node comes back, its orphan sweep reports the volume)",
			node, v1.TaintNodeOutOfService, r.o.NodeLossGrace, in.Volume)
		logger.Info("Dropping the in-flight record of a claim whose node is lost", "node", node, "volume", in.Volume)
	case records.CleanUp:
		if claim.DeletionTimestamp == nil {
			r.o.Recorder.Eventf(claim, v1.EventTypeNormal, "VolumeInFlightUnused",
				"the claim will not use its own volume %s (%s): deleting it", in.Volume, unusedWhy(claim))
		}
		if err := r.deleteUnsaved(ctx, claim, in.Volume); err != nil {
			var gave *abandonError
			if !errors.As(err, &gave) {
				r.o.Recorder.Event(claim, v1.EventTypeWarning, "ProvisioningCleanupFailed",
					fmt.Sprintf("the volume %s made for the claim is not saved in a PV, and it cannot be confirmed deleted yet: %v", in.Volume, err))
				return err
			}
			r.abandon(ctx, claim, in.Volume, gave)
		}
	}
	return p.dropRecord(ctx, claim)
}

// HandBack settles every in-flight record it can, once, for a switch back
// to external-provisioner and KCM's binder, which do not know the record:
// records whose PV is saved go at once, deleted claims' volumes are cleaned
// up, and the claims still waiting for their volume are returned (run it
// again once the upstream pair has provisioned them), in key order: it
// settles them in that order, so that a run is the same every time. Call it
// with the informers synced and nothing else running the reconciler.
func (r *InFlight) HandBack(ctx context.Context) ([]string, error) {
	r.handBack = true
	var claims []*v1.PersistentVolumeClaim
	for _, obj := range r.o.Claims.GetStore().List() {
		if claim, ok := obj.(*v1.PersistentVolumeClaim); ok && inflight.Holds(claim) {
			claims = append(claims, claim)
		}
	}
	slices.SortFunc(claims, func(a, b *v1.PersistentVolumeClaim) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	var left []string
	for _, claim := range claims {
		key := claim.Namespace + "/" + claim.Name
		if err := r.Reconcile(ctx, key); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		if fresh, err := r.p.o.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{}); err == nil &&
			fresh.UID == claim.UID && inflight.Holds(fresh) {
			left = append(left, key)
		}
	}
	return left, nil
}
