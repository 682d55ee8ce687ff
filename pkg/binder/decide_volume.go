package binder

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/migration"
)

// Unbind says how to undo a volume's link to a claim that is bound elsewhere.
type Unbind int

const (
	// KeepClaimRef leaves spec.claimRef alone.
	KeepClaimRef Unbind = iota
	// ClearClaimRef removes a claimRef that the binder made, with its
	// bound-by-controller annotation.
	ClearClaimRef
	// ClearClaimUID keeps a user's pre-binding and clears only its UID.
	ClearClaimUID
)

// VolumeInput is everything a volume decision looks at.
type VolumeInput struct {
	Volume *v1.PersistentVolume
	// Claim is the claim that claimRef names, as fresh as the caller could
	// make it; nil when it does not exist or has another UID.
	Claim *v1.PersistentVolumeClaim
}

// VolumeDecision is what to do with one volume.
type VolumeDecision struct {
	// Phase is the phase to set, "" to leave it. Message goes with it.
	Phase   v1.PersistentVolumePhase
	Message string
	Unbind  Unbind
	// SyncClaim asks for the claim named by claimRef to be synced.
	SyncClaim bool
	// Event is recorded on the volume; ClaimEvent on its claim.
	Event, ClaimEvent *Event
	// Anneal: the volume's CSI-migration annotation (or the in-tree
	// deletion finalizer of a migrated volume) needs a write first.
	Anneal bool
}

// DecideVolume is the volume half of the binder: a pure function.
func DecideVolume(in VolumeInput) VolumeDecision {
	d := decideVolume(in)
	d.Anneal = migration.NeedsAnneal(in.Volume)
	return d
}

func decideVolume(in VolumeInput) VolumeDecision {
	pv := in.Volume
	ref := pv.Spec.ClaimRef
	switch {
	case ref == nil || ref.UID == "":
		// Free, or pre-bound by a user and waiting for its claim.
		return VolumeDecision{Phase: v1.VolumeAvailable}
	case in.Claim == nil:
		return release(pv)
	case in.Claim.Spec.VolumeName == "":
		// The first binding step is done; the claim worker does the rest.
		if volumeModeOf(in.Claim.Spec.VolumeMode) != volumeModeOf(pv.Spec.VolumeMode) {
			return VolumeDecision{
				Event:      warning(ReasonVolumeMismatch, "cannot bind PersistentVolume to requested claim %q: incompatible volumeMode", in.Claim.Name),
				ClaimEvent: warning(ReasonVolumeMismatch, "cannot bind PersistentVolume %q to requested claim: incompatible volumeMode", pv.Name),
			}
		}
		return VolumeDecision{SyncClaim: true}
	case in.Claim.Spec.VolumeName == pv.Name:
		return VolumeDecision{Phase: v1.VolumeBound}
	case metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned) &&
		pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete:
		// The claim is bound to another volume: this dynamic one is spare.
		return release(pv)
	case metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnBoundByController):
		return VolumeDecision{Phase: v1.VolumeAvailable, Unbind: ClearClaimRef}
	default:
		return VolumeDecision{Phase: v1.VolumeAvailable, Unbind: ClearClaimUID}
	}
}

// release marks a volume whose claim is gone Released, then applies its
// reclaim policy. Deletion belongs to the external deleter named by
// pv.kubernetes.io/provisioned-by; tether has no in-tree deleters and no
// recycler.
func release(pv *v1.PersistentVolume) VolumeDecision {
	if pv.Status.Phase == v1.VolumeFailed {
		return VolumeDecision{}
	}
	d := VolumeDecision{Phase: v1.VolumeReleased}
	switch pv.Spec.PersistentVolumeReclaimPolicy {
	case v1.PersistentVolumeReclaimDelete:
		// As KCM: a provisioner's volume, a migrated in-tree volume or a CSI
		// volume is left to its external deleter (for a static CSI volume,
		// external-provisioner's HonorPVReclaimPolicy, or tether's).
		if !metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned) &&
			!metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnMigratedTo) && pv.Spec.CSI == nil {
			d.Phase = v1.VolumeFailed
			d.Message = "no deleter for this volume: it has reclaim policy Delete but no " + storagehelpers.AnnDynamicallyProvisioned + " annotation"
			d.Event = warning(ReasonVolumeFailedDelete, "%s", d.Message)
		}
	case v1.PersistentVolumeReclaimRecycle:
		d.Phase = v1.VolumeFailed
		d.Message = "the Recycle reclaim policy is not supported (it is deprecated upstream); use Retain or Delete"
		d.Event = warning(ReasonVolumeFailedRecycle, "%s", d.Message)
	}
	return d
}
