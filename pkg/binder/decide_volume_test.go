package binder

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDecideVolume(t *testing.T) {
	bound := v1.VolumeBound
	claimed := func(opts ...pvOpt) *v1.PersistentVolume {
		return newPV("pv-1", "1Gi", append([]pvOpt{pvClaimRef("c", "uid-c"), pvPhase(bound)}, opts...)...)
	}
	tests := []struct {
		name       string
		volume     *v1.PersistentVolume
		claim      *v1.PersistentVolumeClaim
		phase      v1.PersistentVolumePhase
		unbind     Unbind
		syncClaim  bool
		anneal     bool
		event      wantEvent
		claimEvent wantEvent
	}{
		{name: "volume without claimRef, available",
			volume: newPV("pv-1", "1Gi", pvPhase("")), phase: v1.VolumeAvailable},
		{name: "volume without claimRef in phase Released, available",
			volume: newPV("pv-1", "1Gi", pvPhase(v1.VolumeReleased)), phase: v1.VolumeAvailable},
		{name: "volume with claimRef without UID (user pre-bound), available",
			volume: newPV("pv-1", "1Gi", pvClaimRef("c", ""), pvPhase("")), phase: v1.VolumeAvailable},
		{name: "volume with claimRef without UID, claim exists, available",
			volume: newPV("pv-1", "1Gi", pvClaimRef("c", "")), claim: newPVC("c", "1Gi"), phase: v1.VolumeAvailable},

		// The claim is gone (or is another claim with the same name).
		{name: "claim gone, Retain, released",
			volume: claimed(), phase: v1.VolumeReleased},
		{name: "claim gone, already Released, Retain, released",
			volume: claimed(pvPhase(v1.VolumeReleased)), phase: v1.VolumeReleased},
		{name: "claim gone, Delete with provisioned-by, released for the deleter",
			volume: claimed(pvReclaim(v1.PersistentVolumeReclaimDelete), pvDynamic(csiDriver)), phase: v1.VolumeReleased},
		{name: "claim gone, Delete without provisioned-by, failed",
			volume: claimed(pvReclaim(v1.PersistentVolumeReclaimDelete)), phase: v1.VolumeFailed,
			event: wantEvent{typ: v1.EventTypeWarning, reason: ReasonVolumeFailedDelete, msg: "provisioned-by"}},
		// Issue 11: KCM leaves these to their external deleter.
		{name: "claim gone, static CSI volume with Delete, released for the CSI provisioner",
			volume: claimed(pvReclaim(v1.PersistentVolumeReclaimDelete), pvCSISource(csiDriver)), phase: v1.VolumeReleased},
		{name: "claim gone, migrated in-tree volume with Delete, released for the CSI provisioner",
			volume: claimed(pvReclaim(v1.PersistentVolumeReclaimDelete), pvAnn("pv.kubernetes.io/migrated-to", "ebs.csi.aws.com")), phase: v1.VolumeReleased},
		{name: "gp2 volume provisioned in-tree: migrated-to annotated first",
			volume: claimed(pvDynamic("kubernetes.io/aws-ebs")), claim: newPVC("c", "1Gi", claimBound("pv-1")), phase: v1.VolumeBound, anneal: true},
		{name: "claim gone, Recycle, failed",
			volume: claimed(pvReclaim(v1.PersistentVolumeReclaimRecycle)), phase: v1.VolumeFailed,
			event: wantEvent{typ: v1.EventTypeWarning, reason: ReasonVolumeFailedRecycle, msg: "Recycle"}},
		{name: "claim gone, Recycle with provisioned-by, still failed",
			volume: claimed(pvReclaim(v1.PersistentVolumeReclaimRecycle), pvDynamic(csiDriver)), phase: v1.VolumeFailed,
			event: warningEvent(ReasonVolumeFailedRecycle)},
		{name: "claim gone, already Failed, no change",
			volume: claimed(pvPhase(v1.VolumeFailed), pvReclaim(v1.PersistentVolumeReclaimDelete))},
		{name: "claim gone, already Failed after Recycle, no change and no new event",
			volume: claimed(pvPhase(v1.VolumeFailed), pvReclaim(v1.PersistentVolumeReclaimRecycle))},

		// The claim exists with the claimRef's UID.
		{name: "claim exists but unbound, sync the claim",
			volume: claimed(pvBoundByController(), pvPhase(v1.VolumeAvailable)), claim: newPVC("c", "1Gi"), syncClaim: true},
		{name: "claim exists but unbound, nil and Filesystem volumeModes agree, sync the claim",
			volume: claimed(pvVolumeMode(v1.PersistentVolumeFilesystem)), claim: newPVC("c", "1Gi"), syncClaim: true},
		{name: "claim exists but unbound, volumeMode mismatch, events on both",
			volume: claimed(pvVolumeMode(v1.PersistentVolumeBlock)), claim: newPVC("c", "1Gi"),
			event:      warningEvent(ReasonVolumeMismatch),
			claimEvent: wantEvent{typ: v1.EventTypeWarning, reason: ReasonVolumeMismatch, msg: `"pv-1"`}},
		{name: "claim exists but unbound, Block claim and nil (Filesystem) volume, events on both",
			volume: claimed(), claim: newPVC("c", "1Gi", claimVolumeMode(v1.PersistentVolumeBlock)),
			event: warningEvent(ReasonVolumeMismatch), claimEvent: warningEvent(ReasonVolumeMismatch)},
		{name: "claim bound to this volume, bound",
			volume: claimed(pvPhase(v1.VolumeAvailable)), claim: newPVC("c", "1Gi", claimBound("pv-1")), phase: v1.VolumeBound},
		{name: "claim bound to this volume, already Bound, bound",
			volume: claimed(), claim: newPVC("c", "1Gi", claimBound("pv-1")), phase: v1.VolumeBound},
		{name: "claim with volumeName of this volume but not yet bind-completed, bound",
			volume: claimed(), claim: newPVC("c", "1Gi", claimVolume("pv-1")), phase: v1.VolumeBound},

		// The claim is bound to another volume.
		{name: "claim bound elsewhere, dynamic volume with Delete, released",
			volume: claimed(pvDynamic(csiDriver), pvReclaim(v1.PersistentVolumeReclaimDelete), pvBoundByController()),
			claim:  newPVC("c", "1Gi", claimBound("pv-other")), phase: v1.VolumeReleased},
		{name: "claim bound elsewhere, dynamic volume with Delete already Failed, no change",
			volume: claimed(pvDynamic(csiDriver), pvReclaim(v1.PersistentVolumeReclaimDelete), pvPhase(v1.VolumeFailed)),
			claim:  newPVC("c", "1Gi", claimBound("pv-other"))},
		{name: "claim bound elsewhere, bound by controller, available and claimRef cleared",
			volume: claimed(pvBoundByController()), claim: newPVC("c", "1Gi", claimBound("pv-other")),
			phase: v1.VolumeAvailable, unbind: ClearClaimRef},
		{name: "claim bound elsewhere, dynamic volume with Retain bound by controller, available and claimRef cleared",
			volume: claimed(pvDynamic(csiDriver), pvBoundByController()), claim: newPVC("c", "1Gi", claimBound("pv-other")),
			phase: v1.VolumeAvailable, unbind: ClearClaimRef},
		{name: "claim bound elsewhere, user pre-bound, available and only the UID cleared",
			volume: claimed(), claim: newPVC("c", "1Gi", claimBound("pv-other")),
			phase: v1.VolumeAvailable, unbind: ClearClaimUID},
		{name: "claim with volumeName of another volume (not bind-completed), user pre-bound, UID cleared",
			volume: claimed(), claim: newPVC("c", "1Gi", claimVolume("pv-other")),
			phase: v1.VolumeAvailable, unbind: ClearClaimUID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DecideVolume(VolumeInput{Volume: tt.volume, Claim: tt.claim})
			if d.Phase != tt.phase {
				t.Errorf("Phase = %q, want %q", d.Phase, tt.phase)
			}
			if (d.Phase == v1.VolumeFailed) != (d.Message != "") {
				t.Errorf("Phase %q with message %q: want a message exactly for Failed", d.Phase, d.Message)
			}
			if d.Unbind != tt.unbind {
				t.Errorf("Unbind = %d, want %d", d.Unbind, tt.unbind)
			}
			if d.Anneal != tt.anneal {
				t.Errorf("Anneal = %v, want %v", d.Anneal, tt.anneal)
			}
			if d.SyncClaim != tt.syncClaim {
				t.Errorf("SyncClaim = %v, want %v", d.SyncClaim, tt.syncClaim)
			}
			checkEvent(t, "volume", d.Event, tt.event)
			checkEvent(t, "claim", d.ClaimEvent, tt.claimEvent)
		})
	}
}
