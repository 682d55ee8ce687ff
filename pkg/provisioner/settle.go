package provisioner

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/tether-csi/tether/pkg/inflight"
)

// settleOp is what the in-flight reconciler does with a claim's record.
type settleOp int

const (
	// settleKeep leaves the record: the volume is on its way (the library
	// provisions it), or the claim lives and its volume may still exist.
	settleKeep settleOp = iota
	// settleWaitFor requeues the claim after the step's wait.
	settleWaitFor
	// settleForget drops the record: a PV tracks the volume.
	settleForget
	// settleCleanUp finds the unsaved volume of a deleted claim again,
	// deletes it, and drops the record.
	settleCleanUp
	// settleNodeGone drops the record of a node-mode claim whose selected
	// node is deleted: its local volume went with the node.
	settleNodeGone
	// settleElsewhere keeps the record of a claim bound to a volume other
	// than its own, and says so: the claim's own volume may exist, and is
	// cleaned up when the claim is deleted.
	settleElsewhere
)

// settleInput is what the decision reads.
type settleInput struct {
	Claim *v1.PersistentVolumeClaim
	// Volume is the name the record is for; PV, when not nil, is the PV of
	// that name, whatever its claim.
	Volume string
	PV     *v1.PersistentVolume
	// HandedOff is when this process last returned the claim's PV to the
	// library for saving (zero: not recently). The library saves it after
	// Provision returns, with retries; until then "no PV" does not mean
	// "unsaved".
	HandedOff time.Time
	// Owns: this provisioner's driver holds the claim's volume (always,
	// except in node-deployment mode). NodeGone: in node-deployment mode,
	// the claim's selected node is deleted.
	Owns, NodeGone bool
	Now            time.Time
	// HandBack: the upstream pair takes over (provisioner --hand-back): a
	// record whose PV is saved goes at once, not after the binder's grace.
	HandBack bool
}

// settleStep is the decision.
type settleStep struct {
	Op   settleOp
	Wait time.Duration
}

// saveGrace is how long after Provision returned a PV the reconciler waits
// for the library to save it before it takes "no PV" for "unsaved": the
// library tries five times, ten seconds apart.
const saveGrace = 90 * time.Second

// saveRecheck is how often a deleted claim whose PV is being saved is
// looked at again.
const saveRecheck = 5 * time.Second

// decideSettle says what to do with a claim that holds the in-flight
// record. It never deletes a volume a PV names, and deletes a volume only
// for a claim that is being deleted, when this provisioner made it.
func decideSettle(in settleInput) settleStep {
	claim, pv := in.Claim, in.PV
	deleting := claim.DeletionTimestamp != nil
	if pv != nil {
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != claim.UID {
			// A PV holds the name for another claim (or for none: the binder
			// clears the UID of a released Retain PV): the volume is tracked.
			return settleStep{Op: settleForget}
		}
		if wait := settleWait(claim, pv, in.Now); wait > 0 && !in.HandBack {
			return settleStep{Op: settleWaitFor, Wait: wait}
		}
		return settleStep{Op: settleForget}
	}
	if !deleting {
		if claim.Spec.VolumeName != "" && claim.Spec.VolumeName != in.Volume {
			return settleStep{Op: settleElsewhere}
		}
		return settleStep{Op: settleKeep}
	}
	if !in.Owns {
		if in.NodeGone {
			return settleStep{Op: settleNodeGone}
		}
		return settleStep{Op: settleKeep} // another node's provisioner cleans it up
	}
	if !in.HandedOff.IsZero() && in.Now.Sub(in.HandedOff) < saveGrace {
		return settleStep{Op: settleWaitFor, Wait: saveRecheck}
	}
	return settleStep{Op: settleCleanUp}
}

// binderGrace is how long after its PV is saved a claim's in-flight record
// is left for the binder, which drops it in the write that binds the claim
// (one write fewer per claim). A binder that does not know the record
// (kube-controller-manager's) binds the claim without dropping it; the
// claim's update then has the reconciler drop it at once, as does the
// claim's deletion; so the grace only matters while no binder has bound
// the claim. It was 10 s: 10,000 claims at once (make bench-provisioner)
// kept tether's binder behind by more than that, and the reconciler's own
// write then cost a write and a conflict with the bind for 0.69 claims in
// one.
const binderGrace = 2 * time.Minute

// settleWait says how much longer the in-flight record of a claim whose PV
// is saved is left for the binder: zero means drop it now, as the claim is
// bound already, or being deleted, or the grace is over.
func settleWait(claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, now time.Time) time.Duration {
	if claim.Spec.VolumeName != "" || claim.DeletionTimestamp != nil {
		return 0
	}
	return max(0, binderGrace-now.Sub(pv.CreationTimestamp.Time))
}

// recordedVolume is the volume name a claim's record is for: the one it
// names, or for a record of an older tether, the name derived from the
// claim's UID.
func (p *Provisioner) recordedVolume(claim *v1.PersistentVolumeClaim) string {
	if _, name, ok := inflight.Volume(claim); ok {
		return name
	}
	return VolumeName(p.o.Request.VolumeNamePrefix, string(claim.UID), p.o.Request.VolumeNameUUIDLen)
}
