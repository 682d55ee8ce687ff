package binder

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

// The events of a release for node loss, on the claim, the PV and the node.
const (
	ReasonNodeLost            = "NodeLost"
	ReasonNodeBack            = "NodeBack"
	ReasonReleasedForNodeLoss = "ReleasedForNodeLoss"
	ReasonNodeLossVolume      = "NodeLossVolume"
)

// applyNodeLoss carries out one step, its writes through the Writer
// (apply_nodeloss.go). Every write carries the version it was decided on
// (a conflict has the sync decide again); the release and the claim's
// deletion are first checked on the API server's word.
func (c *Controller) applyNodeLoss(ctx context.Context, in nodeloss.Input, step nodeloss.Step) error {
	pv, node := in.PV, in.Node
	switch step.Op {
	case nodeloss.WaitGrace:
		c.volumeQueue.AddAfter(pv.Name, step.At.Sub(in.Now))
	case nodeloss.MarkLost:
		at := step.Since.Add(c.nodeLoss.grace).UTC().Format(time.RFC3339)
		if err := c.writer.markVolume(ctx, pv, map[string]any{nodeloss.AnnLostNode: node.Name,
			nodeloss.AnnLostHostname: c.lostHostname(pv, node.Name), nodeloss.AnnLostSince: step.Since.UTC().Format(time.RFC3339), nodeloss.AnnReleaseAfter: at,
			nodeloss.AnnLostClaim: string(pv.Spec.ClaimRef.UID), nodeloss.AnnReleased: nil}); err != nil {
			return err
		}
		msg := fmt.Sprintf("node %s is %s since %s; the class releases claims on node loss: claim %s is released at %s unless the node comes back first",
			node.Name, lossWords(node.Loss), step.Since.UTC().Format(time.RFC3339), claimName(pv), at)
		c.nodeLossEvents(in, v1.EventTypeWarning, ReasonNodeLost, msg)
	case nodeloss.Cancel:
		if sent, err := c.claimDeletionSent(ctx, pv); err != nil || sent {
			return err
		}
		return c.unmark(ctx, in)
	case nodeloss.Unmark:
		return c.unmark(ctx, in)
	case nodeloss.Release:
		if lost, err := c.lostOnServer(ctx, node.Name); err != nil || !lost {
			return c.notLost(ctx, pv, node.Name, err)
		}
		// A claim its user deleted needs no release, whatever the cache
		// says (it may not hold the deletion yet).
		if going, err := c.claimDeletionSent(ctx, pv); err != nil || going {
			return err
		}
		if err := c.writer.markVolume(ctx, pv, map[string]any{
			nodeloss.AnnReleased: in.Now.UTC().Format(time.RFC3339)}); err != nil {
			return err
		}
		c.nodeLoss.released.WithLabelValues(string(pv.Spec.PersistentVolumeReclaimPolicy)).Inc()
		c.nodeLossEvents(in, v1.EventTypeWarning, ReasonReleasedForNodeLoss, fmt.Sprintf(
			"node %s has been %s for longer than %s: releasing claim %s (it is deleted, so that its workload makes it again elsewhere); %s",
			node.Name, lossWords(node.Loss), c.nodeLoss.grace, claimName(pv), fate(pv)))
	case nodeloss.DeleteClaim:
		if lost, err := c.lostOnServer(ctx, node.Name); err != nil || !lost {
			return c.notLost(ctx, pv, node.Name, err)
		}
		if on, err := c.policyOnServer(ctx, pv); err != nil || !on {
			return c.notLost(ctx, pv, node.Name, err)
		}
		ref := pv.Spec.ClaimRef
		if err := c.writer.deleteClaim(ctx, ref); err != nil {
			return err
		}
		klog.FromContext(ctx).Info("Deleted a claim released for node loss", "pvc", klog.KRef(ref.Namespace, ref.Name), "node", node.Name)
	case nodeloss.DeleteVolume:
		if err := c.writer.deleteVolume(ctx, pv); err != nil {
			return err
		}
		c.writer.Recorder.Event(pv, v1.EventTypeNormal, ReasonNodeLossVolume, fmt.Sprintf(
			"deleting the PV of a claim released for node loss, without DeleteVolume: %s", leftOnDisk(pv)))
	case nodeloss.DropFinalizer:
		if err := c.writer.dropVolumeFinalizer(ctx, pv, nodeloss.FinalizerDeletion); err != nil {
			return err
		}
		if pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
			c.writer.Recorder.Event(pv, v1.EventTypeNormal, ReasonNodeLossVolume, fmt.Sprintf(
				"kept Released (reclaim policy %s): its data may come back with node %s's disk; delete the PV to let it go, %s",
				pv.Spec.PersistentVolumeReclaimPolicy, pv.Annotations[nodeloss.AnnLostNode], leftOnDisk(pv)))
		}
	}
	return nil
}

// unmark removes the marks, with a NodeBack event when they were the
// bound claim's.
func (c *Controller) unmark(ctx context.Context, in nodeloss.Input) error {
	pv := in.PV
	drop := map[string]any{}
	for _, k := range nodeloss.Marks {
		drop[k] = nil
	}
	if err := c.writer.markVolume(ctx, pv, drop); err != nil {
		return err
	}
	if in.Claim == nil || in.Claim.DeletionTimestamp != nil || pv.Annotations[nodeloss.AnnLostClaim] != string(in.Claim.UID) {
		// Marks of a claim gone, going, or bound no more: no one to tell.
		return nil
	}
	c.nodeLossEvents(in, v1.EventTypeNormal, ReasonNodeBack, fmt.Sprintf(
		"node %s is back, or the class no longer releases claims on node loss, or the volume is pinned to it no more: claim %s is not released",
		pv.Annotations[nodeloss.AnnLostNode], claimName(pv)))
	return nil
}

// claimDeletionSent reports whether the API server says the claim a PV
// is bound to is gone, another, or being deleted, whatever the cache
// says: for a released PV its deletion was sent, and the release goes on;
// before the release, its user deleted it, and there is none. The PV is
// then looked at again shortly.
func (c *Controller) claimDeletionSent(ctx context.Context, pv *v1.PersistentVolume) (bool, error) {
	ref := pv.Spec.ClaimRef
	claim, err := c.opts.Client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, err
	case claim.UID == ref.UID && claim.DeletionTimestamp == nil:
		return false, nil
	}
	klog.FromContext(ctx).V(2).Info("The claim is gone or being deleted on the API server's word", "pvc", klog.KRef(ref.Namespace, ref.Name))
	c.volumeQueue.AddAfter(pv.Name, time.Second)
	return true, nil
}

// policyOnServer reports whether the API server says the PV's class opts
// in now: an admin who opted out (or deleted the class) just before the
// claim's deletion is heard even if the cache has not seen it yet.
func (c *Controller) policyOnServer(ctx context.Context, pv *v1.PersistentVolume) (bool, error) {
	class, err := c.opts.Client.StorageV1().StorageClasses().Get(ctx, storagehelpers.GetPersistentVolumeClass(pv), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil && nodeloss.Policy(class), err
}

// notLost: the API server says the node is not lost, or the class opts
// in no more (or could not be asked). The caches learn of it from their
// informers; the PV is looked at again shortly.
func (c *Controller) notLost(ctx context.Context, pv *v1.PersistentVolume, node string, err error) error {
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("The node is not lost, or the class opts in no more, on the API server's word; not releasing", "node", node)
	c.volumeQueue.AddAfter(pv.Name, 5*time.Second)
	return nil
}

// nodeLossEvents records an event on the claim (when it exists), the PV
// and the node.
func (c *Controller) nodeLossEvents(in nodeloss.Input, kind, reason, msg string) {
	rec := c.writer.Recorder
	if in.Claim != nil {
		rec.Event(in.Claim, kind, reason, msg)
	}
	rec.Event(in.PV, kind, reason, msg)
	name := in.Node.Name
	if name == "" {
		name = in.PV.Annotations[nodeloss.AnnLostNode]
	}
	// As kubelet and the node controller do, a node's events carry its
	// name as UID: the node may be gone.
	rec.Event(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}, kind, reason,
		fmt.Sprintf("PV %s: %s", in.PV.Name, msg))
}

func lossWords(l nodeloss.Loss) string {
	if l == nodeloss.Deleted {
		return "deleted"
	}
	return "tainted " + v1.TaintNodeOutOfService
}

// lostHostname is the value of AnnLostHostname when node is marked lost on
// pv: its hostname label when the events showed one other than its name;
// what the PV's marks already said of that node when they showed none
// (the binder knows it by the marks alone); else nil, no mark.
func (c *Controller) lostHostname(pv *v1.PersistentVolume, node string) any {
	host := c.nodeLoss.tracker.Hostname(node)
	if host == "" && pv.Annotations[nodeloss.AnnLostNode] == node {
		host = pv.Annotations[nodeloss.AnnLostHostname]
	}
	if host == "" || host == node {
		return nil
	}
	return host
}

func claimName(pv *v1.PersistentVolume) string {
	if ref := pv.Spec.ClaimRef; ref != nil {
		return ref.Namespace + "/" + ref.Name
	}
	return "(none)"
}

// fate says what becomes of a released PV.
func fate(pv *v1.PersistentVolume) string {
	if pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete {
		return "PV " + pv.Name + " is then deleted without DeleteVolume"
	}
	return fmt.Sprintf("PV %s is kept Released (reclaim policy %s)", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy)
}

// leftOnDisk says where the volume stays.
func leftOnDisk(pv *v1.PersistentVolume) string {
	handle := pv.Name
	if pv.Spec.CSI != nil {
		handle = pv.Spec.CSI.VolumeHandle
	}
	return fmt.Sprintf("volume %s (class %s) stays on node %s's disk; if the node comes back, its provisioner's orphan sweep reports it",
		handle, storagehelpers.GetPersistentVolumeClass(pv), pv.Annotations[nodeloss.AnnLostNode])
}
