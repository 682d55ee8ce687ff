package explain

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

// The causes of a claim whose volume's node is lost, in a class that
// releases claims on node loss (nodeloss.AnnPolicy; docs/design.md, "Node
// loss").
const (
	// CauseNodeLost: the claim is Bound, its volume's one node is lost, and
	// the binder releases it once the grace is over.
	CauseNodeLost = "NodeLost"
	// CauseReleasedForNodeLoss: the binder released the claim (it is being
	// deleted, or about to be): its StatefulSet makes it again.
	CauseReleasedForNodeLoss = "ReleasedForNodeLoss"
)

// NodeLoss is what the binder's marks on the claim's volume say.
type NodeLoss struct {
	// Node is the lost node; Volume the PV.
	Node   string `json:"node"`
	Volume string `json:"volume"`
	// Since is when the binder first saw the node lost; ReleaseAfter when
	// it releases the claim (unless the node comes back); ReleasedAt when
	// it decided to.
	Since        *time.Time `json:"since,omitempty"`
	ReleaseAfter *time.Time `json:"releaseAfter,omitempty"`
	ReleasedAt   *time.Time `json:"releasedAt,omitempty"`
	// Reclaim is the PV's reclaim policy: Delete, the PV goes (without
	// DeleteVolume); Retain, it stays Released.
	Reclaim string `json:"reclaimPolicy"`
	// EarlierClaim is set when the marks are on the volume of an earlier
	// claim of this name (its UID), released for node loss: this claim is
	// the one made again.
	EarlierClaim string `json:"earlierClaim,omitempty"`
}

// nodeLossOf reads a PV's marks; nil when it has none.
func nodeLossOf(pv *v1.PersistentVolume) *NodeLoss {
	if pv == nil || pv.Annotations[nodeloss.AnnLostNode] == "" {
		return nil
	}
	n := &NodeLoss{Node: pv.Annotations[nodeloss.AnnLostNode], Volume: pv.Name, Reclaim: string(pv.Spec.PersistentVolumeReclaimPolicy)}
	at := func(key string) *time.Time {
		if t, err := time.Parse(time.RFC3339, pv.Annotations[key]); err == nil {
			return &t
		}
		return nil
	}
	n.Since, n.ReleaseAfter, n.ReleasedAt = at(nodeloss.AnnLostSince), at(nodeloss.AnnReleaseAfter), at(nodeloss.AnnReleased)
	return n
}

// nodeLossOfClaim is the node loss of the claim's own volume (its claimRef
// is this claim, and the marks name it), nil for none. Marks that name
// another claim are an earlier claim's, on a PV bound again: the binder
// marks it anew for this one.
func (w *world) nodeLossOfClaim() *NodeLoss {
	pv := w.volume(w.claim.Spec.VolumeName)
	if pv == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != w.claim.UID {
		return nil
	}
	if uid, ok := pv.Annotations[nodeloss.AnnLostClaim]; ok && uid != string(w.claim.UID) {
		return nil
	}
	return nodeLossOf(pv)
}

// earlierRelease is the release of an earlier claim of this name, whose
// volume the binder released for node loss, nil for none.
func (w *world) earlierRelease() *NodeLoss {
	for _, pv := range w.in.Volumes {
		ref := pv.Spec.ClaimRef
		if ref == nil || ref.Namespace != w.claim.Namespace || ref.Name != w.claim.Name || ref.UID == w.claim.UID || !nodeloss.Released(pv) {
			continue
		}
		n := nodeLossOf(pv)
		n.EarlierClaim = string(ref.UID)
		return n
	}
	return nil
}

// nodeLostCause is the cause of a Bound claim whose volume's node is lost.
func (w *world) nodeLostCause(n *NodeLoss) *Cause {
	if n.ReleasedAt != nil {
		return w.releasedCause(n)
	}
	when := "once the binder's grace (--node-loss-grace) is over"
	if n.ReleaseAfter != nil {
		when = "at " + n.ReleaseAfter.UTC().Format(time.RFC3339) + " (in " + until(w.in.Now, *n.ReleaseAfter) + ")"
	}
	return &Cause{Reason: CauseNodeLost,
		Message: fmt.Sprintf("node %s of volume %s is lost (deleted, or tainted %s) since %s; class %q releases claims on node loss: the binder deletes this claim %s, unless the node comes back first; %s",
			n.Node, n.Volume, v1.TaintNodeOutOfService, stamp(n.Since), w.needs.Class, when, afterRelease(n)),
		Action: fmt.Sprintf("to keep the data, bring node %s back (remove the taint once it runs again) before then; otherwise wait: the pod then runs elsewhere with a new, empty volume", n.Node)}
}

// releasedCause is the cause of a claim the binder released.
func (w *world) releasedCause(n *NodeLoss) *Cause {
	msg := fmt.Sprintf("the binder released the claim at %s: node %s of volume %s was lost (since %s) for longer than its grace; %s",
		stamp(n.ReleasedAt), n.Node, n.Volume, stamp(n.Since), afterRelease(n))
	action := "wait: its StatefulSet makes the claim again once it is gone (Kubernetes 1.27 and later), and the pod runs on another node"
	if w.claim.DeletionTimestamp != nil {
		msg += "; it is being deleted: " + holdersText(w.holders())
		action = fmt.Sprintf("wait for the pod on node %s to go: kube-controller-manager's pod GC force-deletes it once the node is NotReady with the %s taint (or 40 s after the Node is deleted); %s",
			n.Node, v1.TaintNodeOutOfService, action)
	}
	return &Cause{Reason: CauseReleasedForNodeLoss, Message: msg, Action: action}
}

// afterRelease says what becomes of the volume.
func afterRelease(n *NodeLoss) string {
	if n.Reclaim == string(v1.PersistentVolumeReclaimDelete) {
		return fmt.Sprintf("PV %s is then deleted without DeleteVolume, and what is on node %s's disk stays there (its orphan sweep reports it if the node comes back)", n.Volume, n.Node)
	}
	return fmt.Sprintf("PV %s is kept Released (reclaim policy %s), with what is on node %s's disk", n.Volume, n.Reclaim, n.Node)
}

func stamp(t *time.Time) string {
	if t == nil {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

func until(now, t time.Time) string {
	d := t.Sub(now).Round(time.Second)
	if d < 0 {
		return "0s"
	}
	return d.String()
}
