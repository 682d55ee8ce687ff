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
	// MarkLost writes AnnLostNode, AnnLostSince and AnnLostClaim (and drops
	// an AnnReleased of another claim): the PV's node is lost, the grace
	// of its claim starts at Step.Since.
	MarkLost
	// Unmark removes the marks of a release not decided, or decided for
	// another claim: the node is back, the class no longer opts in, the
	// affinity pins no lost node, or the claim is gone or going by itself.
	Unmark
	// Cancel removes the marks of a release decided (AnnReleased) whose
	// claim's deletion the cache says was not sent, now that the node is
	// back, the class no longer opts in or the affinity pins another node.
	// The writer first asks the API server: a claim being deleted, or gone,
	// means the deletion was sent, and nothing is removed.
	Cancel
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
	return [...]string{"nothing", "mark-lost", "unmark", "cancel", "wait-grace", "release", "delete-claim", "wait-claim",
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
	// Node is the node the PV is pinned to (Pinned), and whether and since
	// when it is lost; Name "" when the PV is pinned to no node.
	Node  Node
	Now   time.Time
	Grace time.Duration
}

// Step is a decision.
type Step struct {
	Op Op
	// At is when the grace ends (WaitGrace), and Since when it starts
	// (MarkLost writes it).
	At, Since time.Time
}

// Decide is the next step of a PV's release for node loss. It never
// releases for a class without the policy, for a node that is not lost (a
// NotReady node without the out-of-service taint is not), for a PV not
// pinned to that node, for a claim that is gone or going already, or
// before the claim's own grace is over; it deletes only the claim the
// marks name, which is the one the PV is bound to, and never sends
// DeleteVolume (no step does). Once the claim's deletion is sent, the
// release goes on to its end whatever the node and the class do.
func Decide(in Input) Step {
	pv := in.PV
	own := marksOwn(in)
	if Released(pv) && own {
		return follow(in)
	}
	node, since, marked := LostMark(pv)
	if !eligible(in) {
		if Marked(pv) && (own || !stillLost(in, node)) {
			return Step{Op: Unmark}
		}
		// Another claim's marks, its node still lost: kept while the PV is
		// bound again (they name the node, which this binder may know by
		// them alone), until the new claim is bound (a case of its own) or
		// the node is back.
		return Step{Op: Nothing}
	}
	if !marked || !own || node != in.Node.Name || in.Node.Since.Sub(since) >= time.Second {
		return Step{Op: MarkLost, Since: graceStart(in, own)}
	}
	if in.Node.Since.After(since) {
		since = in.Node.Since
	}
	if end := since.Add(in.Grace); in.Now.Before(end) {
		return Step{Op: WaitGrace, At: end}
	}
	return Step{Op: Release}
}

// graceStart is when a claim's grace starts: the binder's first sight of
// its node's loss, but never before the claim was made, nor, for a PV
// whose marks are another claim's (an admin bound it again), before now:
// each claim is a case of its own, with its own full grace. A binder that
// started since times the loss from its own sight: the mark's (older)
// time is timed again.
func graceStart(in Input, own bool) time.Time {
	at := in.Node.Since
	if in.Claim != nil && in.Claim.CreationTimestamp.After(at) {
		at = in.Claim.CreationTimestamp.Time
	}
	if !own && Marked(in.PV) && in.Now.After(at) {
		at = in.Now
	}
	return at
}

// marksOwn reports whether the PV's marks concern the claim its claimRef
// names now: AnnLostClaim is that claim's UID. Marks without AnnLostClaim
// are taken as the claim's while it is gone or going (a release under
// way), and as another's while it lives.
func marksOwn(in Input) bool {
	ref := in.PV.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return false
	}
	uid, ok := in.PV.Annotations[AnnLostClaim]
	if !ok {
		return in.Claim == nil || in.Claim.DeletionTimestamp != nil
	}
	return uid == string(ref.UID)
}

// stillLost reports whether the node the marks name is the one the PV is
// pinned to, still lost, in a class that opts in.
func stillLost(in Input, marked string) bool {
	return in.Policy && in.Node.Name != "" && in.Node.Name == marked && in.Node.Loss != NotLost
}

// eligible: the class opts in; the PV is bound to a claim that is bound
// to it and is not being deleted (a claim the user deleted needs no
// release: its volume takes the usual way); the PV is pinned to a node,
// and that node is lost.
func eligible(in Input) bool {
	ref, claim := in.PV.Spec.ClaimRef, in.Claim
	return in.Policy && ref != nil && ref.UID != "" &&
		claim != nil && claim.UID == ref.UID && claim.Spec.VolumeName == in.PV.Name && claim.DeletionTimestamp == nil &&
		in.Node.Name != "" && in.Node.Loss != NotLost
}

// follow is the rest of a release once it is decided: the claim goes,
// then the PV (Delete) or only its deletion finalizer (Retain).
func follow(in Input) Step {
	pv, claim := in.PV, in.Claim
	if claim != nil && claim.DeletionTimestamp == nil {
		// Not asked to go, as far as the cache knows: a node back since, a
		// class that no longer opts in, an affinity that pins another node
		// still cancel (Cancel asks the API server first).
		if !in.Policy || in.Node.Name != pv.Annotations[AnnLostNode] || in.Node.Loss == NotLost {
			return Step{Op: Cancel}
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
