package records

import (
	"strings"
	"time"

	storagehelpers "k8s.io/component-helpers/storage/volume"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// Op is what the in-flight reconciler does with a claim's record.
type Op int

const (
	// Keep leaves the record: the volume is on its way (the library
	// provisions it), or the claim lives and its volume may still exist.
	Keep Op = iota
	// Requeue requeues the claim after the step's wait.
	Requeue
	// Drop drops the record: a PV tracks the volume, or tracked it
	// once, or no volume can exist.
	Drop
	// CleanUp finds the unsaved volume again, deletes it, and drops
	// the record: the claim is deleted, or will never use the volume (it is
	// bound to another one, or in node-deployment mode it moved to another
	// node).
	CleanUp
	// DropNoneMade drops the record of a claim that is deleted or will
	// never use its volume, without a driver call: every CreateVolume made
	// for it answered that it made no volume, so none exists.
	DropNoneMade
	// DropNodeGone drops the record of a node-mode claim whose record's
	// node is lost (deleted, or tainted out-of-service) for longer than
	// the node-loss grace: no provisioner can reach its local volume, and
	// none is asked to (if the node comes back, its sweep reports it).
	DropNodeGone
	// Leave leaves a record of a format this provisioner does not read
	// (inflight.Unread) as it is, and reports it: neither dropped nor
	// cleaned up on its word (docs/upgrade.md).
	Leave
)

// Owner says which provisioner a record belongs to.
type Owner int

const (
	// OwnedHere: this provisioner made the call the record stands for
	// (always, but in node-deployment mode).
	OwnedHere Owner = iota
	// OwnedElsewhere: another node's provisioner did.
	OwnedElsewhere
	// OwnedByNone: in node-deployment mode, a record that names no node
	// and whose claim has no selected node: no provisioner calls
	// CreateVolume without first recording its node, so no volume exists.
	OwnedByNone
)

// Input is what the decision reads.
type Input struct {
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
	Owner    Owner
	Moved    bool
	NodeGone bool
	NodeWait time.Duration
	Now      time.Time
	// HandBack: the upstream pair takes over (provisioner --hand-back): a
	// record whose PV is saved goes at once, not after the binder's grace.
	HandBack bool
}

// Step is the decision.
type Step struct {
	Op   Op
	Wait time.Duration
}

// SaveGrace is how long after Provision returned a PV the reconciler waits
// for the library to save it before it cleans up a volume that no PV
// names: time for a save that goes through. The library (with
// CreateProvisionedPVLimiter) retries a refused save for ever, so the
// clean-up does not take "no PV" for "never a PV": it first stops every
// later save of the name and waits for one under way (libv8.Saves.Fence),
// and only then reads the PVs and deletes.
const SaveGrace = 90 * time.Second

// SaveRecheck is how often a claim whose PV is being saved is looked at
// again.
const SaveRecheck = 5 * time.Second

// Decide says what to do with a claim that holds the in-flight
// record. It never deletes a volume a PV names or named: a claim bound to
// the record's volume had its PV saved once, whatever became of that PV.
// It deletes only a volume this provisioner made for this very claim,
// once the claim is deleted or can never use it, and drops the record of
// such a claim without a driver call when every CreateVolume made for it
// answered that it made no volume.
func Decide(in Input) Step {
	claim, pv := in.Claim, in.PV
	if inflight.Unread(claim) {
		return Step{Op: Leave}
	}
	deleting := claim.DeletionTimestamp != nil
	if pv != nil {
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != claim.UID {
			// A PV holds the name for another claim (or for none: the binder
			// clears the UID of a released Retain PV): the volume is tracked.
			return Step{Op: Drop}
		}
		if wait := BinderWait(claim, pv, in.Now); wait > 0 && !in.HandBack {
			return Step{Op: Requeue, Wait: wait}
		}
		return Step{Op: Drop}
	}
	ownName := claim.Spec.VolumeName == in.Volume
	if ownName && boundOnce(claim) {
		// Bound to its own volume: its PV was saved once, and that PV's
		// reclaim policy, not the record, says what becomes of the volume.
		return Step{Op: Drop}
	}
	switch in.Owner {
	case OwnedByNone:
		return Step{Op: Drop}
	case OwnedElsewhere:
		if in.NodeGone {
			return Step{Op: DropNodeGone}
		}
		if in.NodeWait > 0 {
			return Step{Op: Requeue, Wait: in.NodeWait}
		}
		return Step{Op: Keep} // the other node's provisioner settles it
	}
	// A claim whose user named its own volume in spec.volumeName before
	// any binder bound it waits for that volume's PV like an unbound claim.
	unused := deleting || claim.Spec.VolumeName != "" && !ownName || in.Moved
	if !unused {
		return Step{Op: Keep}
	}
	if in.NoneMade {
		return Step{Op: DropNoneMade}
	}
	if !in.HandedOff.IsZero() && in.Now.Sub(in.HandedOff) < SaveGrace {
		return Step{Op: Requeue, Wait: SaveRecheck}
	}
	return Step{Op: CleanUp}
}

// boundOnce reports whether a binder bound the claim to the volume its
// spec.volumeName names: the binder's bind-completed annotation, which it
// writes with volumeName, or a phase only the status subresource writes.
// A namespace user may write spec.volumeName, and the annotation too: the
// annotation forged can only leave that claim's own volume to its user, as
// a stripped record can (docs/design.md, "Threat model").
func boundOnce(claim *v1.PersistentVolumeClaim) bool {
	return metav1.HasAnnotation(claim.ObjectMeta, storagehelpers.AnnBindCompleted) ||
		claim.Status.Phase == v1.ClaimBound || claim.Status.Phase == v1.ClaimLost
}

// BinderGrace is how long after its PV is saved a claim's in-flight record
// is left for the binder, which drops it in the write that binds the claim
// (one write fewer per claim). A binder that does not know the record
// (kube-controller-manager's) binds the claim without dropping it; the
// claim's update then has the reconciler drop it at once, as does the
// claim's deletion; so the grace only matters while no binder has bound
// the claim. It is long enough for a binder working through a burst of
// claims to bind them before the reconciler's own write would collide
// with its bind.
const BinderGrace = 2 * time.Minute

// BinderWait says how much longer the in-flight record of a claim whose PV
// is saved is left for the binder: zero means drop it now, as the claim is
// bound already, or being deleted, or the grace is over.
func BinderWait(claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, now time.Time) time.Duration {
	if claim.Spec.VolumeName != "" || claim.DeletionTimestamp != nil {
		return 0
	}
	return max(0, BinderGrace-now.Sub(pv.CreationTimestamp.Time))
}

// validVolumeName reports whether name can be a PV's name (a DNS
// subdomain), the form every volume name tether makes has.
func validVolumeName(name string) bool {
	return len(validation.IsDNS1123Subdomain(name)) == 0
}

// Volume is the volume name a claim's record is for: the name derived
// from the claim's UID under the provisioner's volume name settings. The
// record's own annotation is a namespace user's to write, so it is taken
// only when it names a volume of this very claim: the derived name, or a
// name ending in the claim's whole UID (a record made under another
// --volume-name-prefix). A record that names any other volume (forged, or
// made under another --volume-name-uuid-length) stands for the derived
// name: a repeated CreateVolume of it can only reach this claim's volume.
func Volume(claim *v1.PersistentVolumeClaim, prefix string, uuidLen int) string {
	derived := request.VolumeName(prefix, string(claim.UID), uuidLen)
	if _, name, ok := inflight.Volume(claim); ok && claim.UID != "" && strings.HasSuffix(name, "-"+string(claim.UID)) &&
		validVolumeName(name) {
		return name
	}
	return derived
}

// OwnerOf says whose a claim's record is, to the provisioner of node here
// ("" outside node-deployment mode, where it is always this
// provisioner's). In node-deployment mode it is the node's the record
// names (or, for a record of an older tether, the selected node's): only
// that node's provisioner may answer for the volume, as another node's
// driver answers "not here" for a volume that exists elsewhere. moved says
// that the claim's selected node is no longer that node.
func OwnerOf(claim *v1.PersistentVolumeClaim, here string) (owner Owner, moved bool) {
	if here == "" {
		return OwnedHere, false
	}
	node := Node(claim)
	switch {
	case node == "":
		return OwnedByNone, false
	case node != here:
		return OwnedElsewhere, false
	}
	return OwnedHere, claim.Annotations[storagehelpers.AnnSelectedNode] != node
}

// Node is the node a record stands for: the one it names, or the
// claim's selected node for a record of an older tether.
func Node(claim *v1.PersistentVolumeClaim) string {
	if node := claim.Annotations[inflight.AnnNode]; node != "" {
		return node
	}
	return claim.Annotations[storagehelpers.AnnSelectedNode]
}

// ElsewhereNode is, for the provisioner of node here in node-deployment
// mode, the other node whose provisioner holds the claim's record ("" for
// none, and always outside node-deployment mode, where here is ""): that
// node's local volume must be cleaned up before this node makes one.
func ElsewhereNode(claim *v1.PersistentVolumeClaim, here string) string {
	if here == "" || !inflight.Holds(claim) {
		return ""
	}
	if node := claim.Annotations[inflight.AnnNode]; node != "" && node != here {
		return node
	}
	return ""
}
