package binder

import v1 "k8s.io/api/core/v1"

// ClaimBehindVolume reports whether the cached claim is older than the
// version of it that a volume made for it names: a provisioner writes the
// claim (its in-flight record) and then saves the PV with that version in
// claimRef. A bind from the older copy would fail with a conflict and cost
// a read and a retry; the claim's update event is on its way and syncs the
// claim again, so the sync can wait for it. Versions that are not numbers
// (fake clients) are never behind.
func ClaimBehindVolume(claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) bool {
	if claim == nil || pv == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != claim.UID {
		return false
	}
	ref := pv.Spec.ClaimRef.ResourceVersion
	return isNumber(ref) && isNumber(claim.ResourceVersion) && newer(ref, claim.ResourceVersion)
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
