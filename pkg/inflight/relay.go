package inflight

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// The claim-version relay: the one protocol between tether's provisioner
// and tether's binder besides the record itself, carried in a provisioned
// PV's claimRef.resourceVersion.
//
// The provisioner writes the claim (the record) before it creates the
// volume, and then the PV is saved from a copy of the claim read before
// that write. Left as it is, the PV's claimRef names that older version;
// a binder whose cache still holds it would bind from it, and its bind
// write (which drops the record) would fail with a conflict and cost a
// read and a retry. So:
//
//   - Writer (the provisioner): RelayClaimVersion, called on the PV as it
//     is created, once and only then, sets its claimRef.resourceVersion to
//     the version of the claim that the provisioner's last write of it
//     returned (the one it handed the PV off from).
//   - Reader (the binder): ClaimBehindVolume, asked before it binds a claim
//     to a PV, says whether its cached claim is older than the version the
//     PV relays. If so it does not bind now: the claim's update event is on
//     its way and syncs the claim again.
//
// The relayed version is a hint for when to bind, never a condition of
// binding: every answer of ClaimBehindVolume other than true lets the
// binder bind from what it holds, and a wrong one costs at most a write
// conflict and a retry. So either side may be absent or older: a PV that
// relays no version (made by hand, by another provisioner, by a
// provisioner that handed nothing off, as after its restart), whose
// claimRef is another claim's (another UID), or whose version or the
// cached claim's is not a decimal number (not an etcd revision, as with
// fake clients), is never behind; kube-controller-manager's binder ignores
// the field.

// RelayClaimVersion sets the claimRef's resourceVersion of pv, a PV about
// to be created for the claim its claimRef names, to claimVersion: the
// version of that claim that the provisioner's last write returned. An
// empty claimVersion (none known) or a PV without claimRef is left as it
// is. It changes pv in place: call it on the copy that is sent.
func RelayClaimVersion(pv *v1.PersistentVolume, claimVersion string) {
	if pv == nil || pv.Spec.ClaimRef == nil || claimVersion == "" {
		return
	}
	pv.Spec.ClaimRef.ResourceVersion = claimVersion
}

// ClaimBehindVolume reports whether the cached claim is older than the
// version of it that pv relays (RelayClaimVersion): pv's claimRef has the
// claim's UID and names a version newer than the claim's. Versions that
// are not decimal numbers are never behind.
func ClaimBehindVolume(claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) bool {
	if claim == nil || pv == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != claim.UID {
		return false
	}
	relayed, ok := revision(pv.Spec.ClaimRef.ResourceVersion)
	if !ok {
		return false
	}
	cached, ok := revision(claim.ResourceVersion)
	return ok && relayed > cached
}

// revision parses a resourceVersion as an etcd revision: a decimal number.
func revision(v string) (uint64, bool) {
	for _, r := range v {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}
