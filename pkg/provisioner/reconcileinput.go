package provisioner

import (
	"context"
	"time"

	"github.com/tether-csi/tether/pkg/nodeloss"
	"github.com/tether-csi/tether/pkg/provisioner/records"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// input gathers what records.Decide reads about a claim. fromAPI
// reads the PV from the API server; otherwise the cache is asked, and the
// API server only when the cache has none and the claim is being deleted.
func (r *InFlight) input(ctx context.Context, claim *v1.PersistentVolumeClaim, fromAPI bool) (records.Input, error) {
	p := r.p
	in := records.Input{Claim: claim, Volume: p.recordedVolume(claim), HandedOff: p.handoffs.at(claim.UID),
		NoneMade: p.answers.noVolume(claim.UID), Now: p.now(), HandBack: r.handBack}
	in.Owner, in.Moved = records.OwnerOf(claim, p.nodeName())
	var err error
	if in.PV, err = r.volumeNamed(ctx, in.Volume, claim, fromAPI); err != nil {
		return in, err
	}
	if in.PV == nil && in.Owner == records.OwnedElsewhere {
		if in.NodeGone, in.NodeWait, err = r.nodeLost(ctx, records.Node(claim), in.Now); err != nil {
			return in, err
		}
	}
	return in, nil
}

// volumeNamed returns the saved PV of a name, whatever its claim, or nil.
// A cached PV without a resourceVersion is the library's own copy of a PV
// it has not managed to save yet (its queue-store mode adds it to the
// informer's store): it tracks nothing. When the cache has none, the API
// server is asked only when fromAPI or for a claim being deleted, where
// "no PV" may lead to deleting the volume; otherwise the PV's arrival in
// the cache queues the claim again.
func (r *InFlight) volumeNamed(ctx context.Context, name string, claim *v1.PersistentVolumeClaim, fromAPI bool) (*v1.PersistentVolume, error) {
	if !fromAPI {
		obj, exists, err := r.o.Volumes.GetStore().GetByKey(name)
		if err != nil {
			return nil, err
		}
		if pv, ok := obj.(*v1.PersistentVolume); exists && ok && pv.ResourceVersion != "" {
			return pv, nil
		}
		if claim.DeletionTimestamp == nil {
			return nil, nil
		}
	}
	pv, err := r.p.o.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return pv, err
}

// nodeLost says whether a record's node has been lost (deleted, or
// tainted out-of-service; not merely NotReady) for the node-loss grace,
// and otherwise, while it is lost, how much of the grace is left. The
// loss is timed from the first sight of it (the node events, or this
// reconciler's own reads); that it is lost now is the API server's word
// (a cache may not know a new node yet, nor one that came back).
func (r *InFlight) nodeLost(ctx context.Context, name string, now time.Time) (bool, time.Duration, error) {
	if name == "" {
		return false, 0, nil
	}
	if st, known := r.lost.Get(name); known && st.Loss == nodeloss.NotLost {
		if node, err := r.p.o.Nodes.Get(name); err == nil && nodeloss.OutOfServiceTaint(node) == nil {
			return false, 0, nil
		}
	}
	node, err := r.p.o.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node = nil
	} else if err != nil {
		return false, 0, err
	}
	r.lost.Observe(name, node)
	st, _ := r.lost.Get(name)
	if st.Loss == nodeloss.NotLost {
		return false, 0, nil
	}
	if wait := st.Since.Add(r.o.NodeLossGrace).Sub(now); wait > 0 {
		return false, wait, nil
	}
	return true, 0, nil
}
