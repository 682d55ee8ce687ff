package nodeloss

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// AnnPolicy on a StorageClass, with the value "true", opts the class in.
// Any other value, or none, is off: nothing is ever released for a class
// without it.
const AnnPolicy = "tether.dev/release-on-node-loss"

// The binder's marks on a PV. AnnLostNode, AnnLostSince and AnnLostClaim
// (the UID of the claim they concern) are written when the binder first
// sees the node the PV is pinned to lost, with AnnReleaseAfter (when the
// claim's grace ends: for people and kubectl tether why; the binder reads
// the others), and dropped if the node comes back before the release;
// AnnReleased when it decides to release, before it deletes the claim. A
// PV that carries AnnReleased never gets a DeleteVolume: its node is gone,
// or was, and what is on its disk is left to that node's orphan sweep.
// Marks that name another claim than the PV's claimRef (an admin bound
// the PV again) are that claim's: the bound claim is a new case.
// AnnLostHostname, written with AnnLostNode when the node's
// kubernetes.io/hostname label is not its name, lets a binder that never
// saw the node (it started since, or forgot it) know that a PV pinned by
// that hostname is pinned to it.
const (
	AnnLostNode     = "tether.dev/lost-node"
	AnnLostHostname = "tether.dev/lost-node-hostname"
	AnnLostSince    = "tether.dev/lost-since"
	AnnLostClaim    = "tether.dev/lost-claim"
	AnnReleaseAfter = "tether.dev/release-after"
	AnnReleased     = "tether.dev/released-for-node-loss"
)

// Marks are every annotation the binder writes on a PV for node loss.
var Marks = []string{AnnLostNode, AnnLostHostname, AnnLostSince, AnnLostClaim, AnnReleaseAfter, AnnReleased}

// Marked reports whether a PV carries any of the marks.
func Marked(pv *v1.PersistentVolume) bool {
	for _, k := range Marks {
		if _, ok := pv.Annotations[k]; ok {
			return true
		}
	}
	return false
}

// FinalizerDeletion is external-provisioner's (and tether's provisioner's)
// deletion finalizer on the PVs it made: the binder removes it from a
// released PV once its claim is gone, as no DeleteVolume will be sent.
const FinalizerDeletion = "external-provisioner.volume.kubernetes.io/finalizer"

// DefaultGrace is the default of --node-loss-grace, in the binder and in
// the provisioner.
const DefaultGrace = 5 * time.Minute

// Loss says how a node is lost.
type Loss string

// The losses. A node that is merely NotReady is not lost.
const (
	NotLost      Loss = ""
	Deleted      Loss = "deleted"
	OutOfService Loss = "out-of-service"
)

// Node is what is known of a node: its name, whether and how it is lost,
// and since when.
type Node struct {
	Name  string
	Loss  Loss
	Since time.Time
}

// Policy reports whether a class opts in.
func Policy(class *storagev1.StorageClass) bool {
	return class != nil && class.Annotations[AnnPolicy] == "true"
}

// OutOfServiceTaint returns the node's node.kubernetes.io/out-of-service
// taint, whatever its value and effect, or nil.
func OutOfServiceTaint(node *v1.Node) *v1.Taint {
	if node == nil {
		return nil
	}
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].Key == v1.TaintNodeOutOfService {
			return &node.Spec.Taints[i]
		}
	}
	return nil
}

// StateOf is what a Node object (nil: deleted) says of its loss. seen is
// when the caller first saw it so, used when the taint has no timeAdded
// (kubectl taint writes none).
func StateOf(name string, node *v1.Node, seen time.Time) Node {
	if node == nil {
		return Node{Name: name, Loss: Deleted, Since: seen}
	}
	t := OutOfServiceTaint(node)
	if t == nil {
		return Node{Name: name}
	}
	since := seen
	if t.TimeAdded != nil && !t.TimeAdded.IsZero() && t.TimeAdded.Time.Before(seen) {
		since = t.TimeAdded.Time
	}
	return Node{Name: name, Loss: OutOfService, Since: since}
}

// Released reports whether the binder decided to release the PV's claim.
func Released(pv *v1.PersistentVolume) bool {
	_, ok := pv.Annotations[AnnReleased]
	return ok
}

// LostMark is the binder's note that the PV's node is lost: the node and
// since when. ok is false when there is none (or its time cannot be read).
func LostMark(pv *v1.PersistentVolume) (node string, since time.Time, ok bool) {
	node = pv.Annotations[AnnLostNode]
	if node == "" {
		return "", time.Time{}, false
	}
	since, err := time.Parse(time.RFC3339, pv.Annotations[AnnLostSince])
	if err != nil {
		return node, time.Time{}, false
	}
	return node, since, true
}

// ReleasedAt is when the binder decided to release, zero when it did not.
func ReleasedAt(pv *v1.PersistentVolume) time.Time {
	t, _ := time.Parse(time.RFC3339, pv.Annotations[AnnReleased])
	return t
}

// hasFinalizer reports whether the PV carries the provisioner's deletion
// finalizer.
func hasFinalizer(pv *v1.PersistentVolume) bool {
	return slices.Contains(pv.Finalizers, FinalizerDeletion)
}
