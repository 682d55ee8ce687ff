package nodeloss

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// Op is one step of the release of a PV's claim.
type Op int

// The steps, in the order a release goes through them. Each is one write
// (or none), each is decided again from what the API then says, so a
// restart between two of them resumes where it stopped.
const (
	// Nothing: no release is under way, or it is over (a Retain PV kept,
	// a Delete PV waiting for its last finalizers to go).
	Nothing Op = iota
	// MarkLost writes AnnLostNode and AnnLostSince: the one node of the PV
	// is lost, the grace starts.
	MarkLost
	// Unmark removes the marks: the node is back, or the class no longer
	// opts in, before the claim was deleted.
	Unmark
	// WaitGrace: the node is lost, for less than the grace (Step.At is
	// when it ends).
	WaitGrace
	// Release writes AnnReleased: the decision, before anything is deleted.
	Release
	// DeleteClaim deletes the claim the PV's claimRef names, with its UID
	// as a precondition (never a claim made again under the same name).
	DeleteClaim
	// WaitClaim: the claim is being deleted; kube-controller-manager's
	// pvc-protection keeps it while a pod on the lost node still uses it.
	WaitClaim
	// DeleteVolume deletes the PV object (policy Delete), with its UID as
	// a precondition. No DeleteVolume goes to the driver.
	DeleteVolume
	// DropFinalizer removes the provisioner's deletion finalizer from the
	// PV, whose volume no provisioner will delete.
	DropFinalizer
)

func (o Op) String() string {
	return [...]string{"nothing", "mark-lost", "unmark", "wait-grace", "release", "delete-claim", "wait-claim",
		"delete-volume", "drop-finalizer"}[o]
}

// Input is what a decision reads about one PV.
type Input struct {
	PV *v1.PersistentVolume
	// Claim is the claim the PV's claimRef names, with the claimRef's UID;
	// nil when it is gone (a claim of the same name with another UID is
	// another claim).
	Claim *v1.PersistentVolumeClaim
	// Policy: the PV's class opts in (AnnPolicy).
	Policy bool
	// Node is the one node the PV's node affinity names (Name "" when it
	// names none, or several), or the node of its AnnLostNode mark.
	Node  Node
	Now   time.Time
	Grace time.Duration
}

// Step is a decision.
type Step struct {
	Op Op
	// At is when the grace ends (WaitGrace), and Since when the node was
	// first seen lost (MarkLost writes it).
	At, Since time.Time
}

// Decide is the next step of a PV's release for node loss. It never
// releases for a class without the policy, for a node that is not lost (a
// NotReady node without the out-of-service taint is not), or before the
// grace is over; it deletes only the claim the PV is bound to, and never
// sends DeleteVolume (no step does). Once the claim's deletion is asked
// for, the release goes on to its end whatever the node and the class do.
func Decide(in Input) Step {
	pv := in.PV
	node, since, marked := LostMark(pv)
	annotated := false
	for _, k := range Marks {
		_, has := pv.Annotations[k]
		annotated = annotated || has
	}
	if Released(pv) {
		return follow(in, node)
	}
	if !eligible(in) {
		if annotated {
			return Step{Op: Unmark}
		}
		return Step{Op: Nothing}
	}
	if !marked || node != in.Node.Name || in.Node.Since.Sub(since) >= time.Second {
		// New, or timed again: the binder that decides times the loss from
		// its own first sight of it (a binder that started since, or a
		// return it saw, makes the mark older than its sight). The mark
		// holds whole seconds: a sight less than a second after it is
		// the mark's own.
		return Step{Op: MarkLost, Since: in.Node.Since}
	}
	if in.Node.Since.After(since) {
		since = in.Node.Since
	}
	if end := since.Add(in.Grace); in.Now.Before(end) {
		return Step{Op: WaitGrace, At: end}
	}
	return Step{Op: Release}
}

// eligible: the class opts in, the PV is bound (or was, and its claim is
// gone), its claim is bound to it, and its one node is lost.
func eligible(in Input) bool {
	ref := in.PV.Spec.ClaimRef
	return in.Policy && ref != nil && ref.UID != "" &&
		(in.Claim == nil || in.Claim.Spec.VolumeName == in.PV.Name) &&
		in.Node.Name != "" && in.Node.Loss != NotLost
}

// follow is the rest of a release once it is decided: the claim goes,
// then the PV (Delete) or only its deletion finalizer (Retain).
func follow(in Input, node string) Step {
	pv, claim := in.PV, in.Claim
	if claim != nil && claim.DeletionTimestamp == nil {
		// Not asked to go yet: a node back since, or a class that no longer
		// opts in, still cancels.
		if !in.Policy || in.Node.Name == node && in.Node.Loss == NotLost {
			return Step{Op: Unmark}
		}
		return Step{Op: DeleteClaim}
	}
	if claim != nil {
		return Step{Op: WaitClaim}
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete && pv.DeletionTimestamp == nil {
		return Step{Op: DeleteVolume}
	}
	if hasFinalizer(pv) {
		return Step{Op: DropFinalizer}
	}
	return Step{Op: Nothing}
}
