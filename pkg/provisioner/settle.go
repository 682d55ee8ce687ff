package provisioner

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// settleOp is what the in-flight reconciler does with a claim's record.
type settleOp int

const (
	// settleKeep leaves the record: the volume is on its way (the library
	// provisions it), or the claim lives and its volume may still exist.
	settleKeep settleOp = iota
	// settleWaitFor requeues the claim after the step's wait.
	settleWaitFor
	// settleForget drops the record: a PV tracks the volume, or tracked it
	// once, or no volume can exist.
	settleForget
	// settleCleanUp finds the unsaved volume again, deletes it, and drops
	// the record: the claim is deleted, or will never use the volume (it is
	// bound to another one, or in node-deployment mode it moved to another
	// node).
	settleCleanUp
	// settleNoneMade drops the record of a claim that is deleted or will
	// never use its volume, without a driver call: every CreateVolume made
	// for it answered that it made no volume, so none exists.
	settleNoneMade
	// settleNodeGone drops the record of a node-mode claim whose record's
	// node is lost (deleted, or tainted out-of-service) for longer than
	// the node-loss grace: no provisioner can reach its local volume, and
	// none is asked to (if the node comes back, its sweep reports it).
	settleNodeGone
)

// recordOwner says which provisioner a record belongs to.
type recordOwner int

const (
	// ownedHere: this provisioner made the call the record stands for
	// (always, but in node-deployment mode).
	ownedHere recordOwner = iota
	// ownedElsewhere: another node's provisioner did.
	ownedElsewhere
	// ownedByNone: in node-deployment mode, a record that names no node
	// and whose claim has no selected node: no provisioner calls
	// CreateVolume without first recording its node, so no volume exists.
	ownedByNone
)

// settleInput is what the decision reads.
type settleInput struct {
	Claim *v1.PersistentVolumeClaim
	// Volume is the name the record is for, derived from the claim's UID
	// (see Provisioner.recordedVolume); PV, when not nil, is the saved PV
	// of that name, whatever its claim.
	Volume string
	PV     *v1.PersistentVolume
	// HandedOff is when this process last returned the claim's PV to the
	// library for saving (zero: not recently). The library saves it after
	// Provision returns, with retries; until then "no PV" does not mean
	// "unsaved".
	HandedOff time.Time
	// NoneMade: this process wrote the record on a claim that held none,
	// and every CreateVolume it made for the claim since answered that it
	// made no volume (createAnswers): no volume exists for the claim.
	NoneMade bool
	// Owner says whose record it is. Moved: in node-deployment mode, the
	// claim's selected node is no longer the record's node (the claim was
	// rescheduled). NodeGone: the record's node has been lost (deleted,
	// or tainted out-of-service) for the node-loss grace, on the API
	// server's word; NodeWait, when it is lost for less, is the rest of
	// the grace.
	Owner    recordOwner
	Moved    bool
	NodeGone bool
	NodeWait time.Duration
	Now      time.Time
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

// saveRecheck is how often a claim whose PV is being saved is looked at
// again.
const saveRecheck = 5 * time.Second

// decideSettle says what to do with a claim that holds the in-flight
// record. It never deletes a volume a PV names or named: a claim bound to
// the record's volume had its PV saved once, whatever became of that PV.
// It deletes only a volume this provisioner made for this very claim,
// once the claim is deleted or can never use it, and drops the record of
// such a claim without a driver call when every CreateVolume made for it
// answered that it made no volume.
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
	if claim.Spec.VolumeName == in.Volume {
		// Bound to its own volume: its PV was saved once, and that PV's
		// reclaim policy, not the record, says what becomes of the volume.
		return settleStep{Op: settleForget}
	}
	switch in.Owner {
	case ownedByNone:
		return settleStep{Op: settleForget}
	case ownedElsewhere:
		if in.NodeGone {
			return settleStep{Op: settleNodeGone}
		}
		if in.NodeWait > 0 {
			return settleStep{Op: settleWaitFor, Wait: in.NodeWait}
		}
		return settleStep{Op: settleKeep} // the other node's provisioner settles it
	}
	unused := deleting || claim.Spec.VolumeName != "" || in.Moved
	if !unused {
		return settleStep{Op: settleKeep}
	}
	if in.NoneMade {
		return settleStep{Op: settleNoneMade}
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

// recordedVolume is the volume name a claim's record is for: the name
// derived from the claim's UID under this provisioner's settings. The
// record's own annotation is a namespace user's to write, so it is taken
// only when it names a volume of this very claim: the derived name, or a
// name ending in the claim's whole UID (a record made under another
// --volume-name-prefix). A record that names any other volume (forged, or
// made under another --volume-name-uuid-length) stands for the derived
// name: a repeated CreateVolume of it can only reach this claim's volume.
func (p *Provisioner) recordedVolume(claim *v1.PersistentVolumeClaim) string {
	derived := request.VolumeName(p.o.Request.VolumeNamePrefix, string(claim.UID), p.o.Request.VolumeNameUUIDLen)
	if _, name, ok := inflight.Volume(claim); ok && claim.UID != "" && strings.HasSuffix(name, "-"+string(claim.UID)) &&
		validVolumeName(name) {
		return name
	}
	return derived
}

// validVolumeName reports whether name can be a PV's name (a DNS
// subdomain), the form every volume name tether makes has.
func validVolumeName(name string) bool {
	return len(validation.IsDNS1123Subdomain(name)) == 0
}

// settleBeforeRelease drops the in-flight record of the claim a PV names,
// before the library removes the PV's deletion finalizer. Until then the
// PV cannot go without the library's own delete; after, an admin may keep
// the volume (reclaim policy Retain) and delete the PV at once, before
// the reconciler or the binder saw it, and a record left behind would have
// the claim's deletion find the volume again and delete it. The claim is
// read from the API server; a record that is not this claim's for this
// very PV is left alone. A claim whose clean-up or provisioning is under
// way is busy: the error keeps the finalizer, and the library retries.
func (p *Provisioner) settleBeforeRelease(ctx context.Context, pv *v1.PersistentVolume) error {
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return nil
	}
	claim, err := p.o.Client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading claim %s/%s before releasing PV %s: %w", ref.Namespace, ref.Name, pv.Name, err)
	}
	if claim.UID != ref.UID || !inflight.Holds(claim) || p.recordedVolume(claim) != pv.Name {
		return nil
	}
	if driver, _, ok := inflight.Volume(claim); ok && driver != p.o.Driver.DriverName() {
		return nil
	}
	unlock, ok := p.locks.TryLock(string(claim.UID))
	if !ok {
		return fmt.Errorf("claim %s/%s is busy: PV %s keeps its finalizer until the claim's in-flight record is settled", ref.Namespace, ref.Name, pv.Name)
	}
	defer unlock()
	klog.FromContext(ctx).V(2).Info("Settling the in-flight record before the PV's finalizer goes", "pvc", klog.KObj(claim), "pv", klog.KObj(pv))
	if err := p.forgetInFlight(ctx, claim); err != nil {
		return err
	}
	p.handoffs.done(claim.UID)
	p.secretsUsed.done(claim.UID)
	p.answers.done(claim.UID)
	return nil
}
