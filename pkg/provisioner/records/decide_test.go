package records

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

func TestDecideSettle(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	deleted := func(c *v1.PersistentVolumeClaim) { ts := metav1.NewTime(now); c.DeletionTimestamp = &ts }
	hand := claimAnn("hand-back", "yes")
	// noneMade: every CreateVolume this process made under the record it
	// wrote answered that it made no volume (createAnswers).
	noneMade := claimAnn("none-made", "yes")
	boundTo := func(name string) claimOpt { return func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName = name } }
	bindCompleted := claimAnn(storagehelpers.AnnBindCompleted, "yes")
	lost := func(c *v1.PersistentVolumeClaim) { c.Status.Phase = v1.ClaimLost }
	// pv is the PV of the record's name, pre-bound to the claim UID uid
	// (none when empty), made age ago.
	pv := func(uid types.UID, age time.Duration) *v1.PersistentVolume {
		p := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: testVolume, CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		if uid != "" {
			p.Spec.ClaimRef = &v1.ObjectReference{Namespace: testNS, Name: testClaim, UID: uid}
		}
		return p
	}
	const own = types.UID(testUID)
	tests := []struct {
		name      string
		claim     *v1.PersistentVolumeClaim
		pv        *v1.PersistentVolume
		handedOff time.Duration // ago; 0 for none
		owner     Owner
		moved     bool
		nodeGone  bool
		want      Step
	}{
		{"saved PV, claim not bound yet: left to the binder's bind write", newClaim(), pv(own, time.Second), 0, OwnedHere, false, false, Step{Op: Requeue, Wait: BinderGrace - time.Second}},
		{"saved PV, the binder's grace is over", newClaim(), pv(own, BinderGrace), 0, OwnedHere, false, false, Step{Op: Drop}},
		{"saved PV, claim bound", newClaim(boundTo(testVolume)), pv(own, 0), 0, OwnedHere, false, false, Step{Op: Drop}},
		{"saved PV, claim deleted", newClaim(deleted), pv(own, 0), 0, OwnedHere, false, false, Step{Op: Drop}},
		{"PV of the name for another claim: tracked, never deleted", newClaim(deleted), pv("other", 0), 0, OwnedHere, false, false, Step{Op: Drop}},
		{"PV of the name with no claim: tracked, never deleted", newClaim(deleted), pv("", 0), 0, OwnedHere, false, false, Step{Op: Drop}},
		{"no PV, claim lives: the library provisions", newClaim(), nil, 0, OwnedHere, false, false, Step{Op: Keep}},
		{"no PV, claim bound to its own volume: its PV was saved once, never deleted", newClaim(boundTo(testVolume), bindCompleted), nil, 0, OwnedHere, false, false, Step{Op: Drop}},
		{"no PV, deleted claim bound to its own volume (Lost): never deleted", newClaim(deleted, boundTo(testVolume), lost), nil, 0, OwnedHere, false, false, Step{Op: Drop}},
		{"no PV, the claim's user named its own volume, claim lives: it waits for the PV", newClaim(boundTo(testVolume)), nil, 0, OwnedHere, false, false, Step{Op: Keep}},
		{"no PV, the claim's user named its own volume, claim deleted: cleaned up", newClaim(deleted, boundTo(testVolume)), nil, 0, OwnedHere, false, false, Step{Op: CleanUp}},
		{"no PV, claim bound to another volume: its own is unused, cleaned up", newClaim(boundTo("pvc-recycled")), nil, 0, OwnedHere, false, false, Step{Op: CleanUp}},
		{"no PV, claim bound to another volume, PV just handed off: wait for its save", newClaim(boundTo("pvc-recycled")), nil, time.Second, OwnedHere, false, false, Step{Op: Requeue, Wait: SaveRecheck}},
		{"no PV, claim deleted, PV just handed to the library: wait for its save", newClaim(deleted), nil, time.Second, OwnedHere, false, false, Step{Op: Requeue, Wait: SaveRecheck}},
		{"no PV, claim deleted, hand-off long ago: clean up", newClaim(deleted), nil, SaveGrace + time.Second, OwnedHere, false, false, Step{Op: CleanUp}},
		{"no PV, claim deleted, no hand-off: clean up", newClaim(deleted), nil, 0, OwnedHere, false, false, Step{Op: CleanUp}},
		{"node mode: claim rescheduled away from the record's node: clean up there", newClaim(), nil, 0, OwnedHere, true, false, Step{Op: CleanUp}},
		{"node mode: claim deleted, another node's volume", newClaim(deleted), nil, 0, OwnedElsewhere, false, false, Step{Op: Keep}},
		{"node mode: claim lives, another node's record", newClaim(), nil, 0, OwnedElsewhere, false, false, Step{Op: Keep}},
		{"node mode: the record's node is lost for the grace", newClaim(deleted), nil, 0, OwnedElsewhere, false, true, Step{Op: DropNodeGone}},
		{"node mode: a record of no node: nothing was made", newClaim(deleted), nil, 0, OwnedByNone, false, false, Step{Op: Drop}},
		{"hand-back: saved PV, claim not bound yet: dropped at once", newClaim(hand), pv(own, time.Second), 0, OwnedHere, false, false, Step{Op: Drop}},
		// Issue 33, defect 7: a claim deleted with its class held its
		// namespace 13.5 minutes for a volume that was never made.
		{"every CreateVolume answered final, claim deleted: the record goes without a driver call", newClaim(deleted, noneMade), nil, 0, OwnedHere, false, false, Step{Op: DropNoneMade}},
		{"every CreateVolume answered final, claim bound to another volume: the record goes without a driver call", newClaim(noneMade, boundTo("pvc-recycled")), nil, 0, OwnedHere, false, false, Step{Op: DropNoneMade}},
		{"node mode: every CreateVolume answered final, claim rescheduled away: the record goes without a driver call", newClaim(noneMade), nil, 0, OwnedHere, true, false, Step{Op: DropNoneMade}},
		{"every CreateVolume answered final, claim lives: the record stays for the library's retry", newClaim(noneMade), nil, 0, OwnedHere, false, false, Step{Op: Keep}},
		{"every CreateVolume answered final, claim deleted, a PV of the name for another claim: tracked, forgotten", newClaim(deleted, noneMade), pv("other", 0), 0, OwnedHere, false, false, Step{Op: Drop}},
		{"node mode: every CreateVolume answered final here, another node's record: left to that node", newClaim(deleted, noneMade), nil, 0, OwnedElsewhere, false, false, Step{Op: Keep}},
		// A record of a format this provisioner does not read
		// (docs/upgrade.md): left as it is, whatever else holds.
		{"unread format, claim deleted, no PV: left, never cleaned up on its word", newClaim(deleted, recordOf("2")), nil, 0, OwnedHere, false, false, Step{Op: Leave}},
		{"unread format, claim deleted, every call answered final: left", newClaim(deleted, noneMade, recordOf("2")), nil, 0, OwnedHere, false, false, Step{Op: Leave}},
		{"unread format, saved PV: left to a provisioner that reads it", newClaim(recordOf("3")), pv(own, BinderGrace), 0, OwnedHere, false, false, Step{Op: Leave}},
		{"unread format, PV of the name for another claim: left", newClaim(deleted, recordOf("2")), pv("other", 0), 0, OwnedHere, false, false, Step{Op: Leave}},
		{"unread format, claim bound to another volume: left", newClaim(boundTo("pvc-recycled"), recordOf("x")), nil, 0, OwnedHere, false, false, Step{Op: Leave}},
		{"unread format, another node's lost node: left", newClaim(deleted, recordOf("2")), nil, 0, OwnedElsewhere, false, true, Step{Op: Leave}},
		{"format 1 named: read as before", newClaim(deleted, recordOf("1")), nil, 0, OwnedHere, false, false, Step{Op: CleanUp}},
	}
	// The node lost for less than the grace: looked at again when it ends.
	lostFor := Input{Claim: newClaim(deleted), Volume: testVolume, Owner: OwnedElsewhere, NodeWait: time.Minute, Now: now}
	if got, want := Decide(lostFor), (Step{Op: Requeue, Wait: time.Minute}); got != want {
		t.Errorf("node lost within the grace: Decide = %+v, want %+v", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Claim: tt.claim, Volume: testVolume, PV: tt.pv, Owner: tt.owner, Moved: tt.moved, NodeGone: tt.nodeGone, Now: now,
				HandBack: tt.claim.Annotations["hand-back"] == "yes", NoneMade: tt.claim.Annotations["none-made"] == "yes"}
			if tt.handedOff > 0 {
				in.HandedOff = now.Add(-tt.handedOff)
			}
			if got := Decide(in); got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestDecideTenantNamedOwnVolumeIsNoProofOfASave: a namespace user sets
// the claim's spec.volumeName to its own volume's name while a timed-out
// CreateVolume still makes it; no PV was ever saved. Found by the
// simulator (seed 1036, -with=own-volume-name): the record went as if the
// claim had been bound, and the volume was tracked by nothing once the
// claim was deleted. Only a binder's bind (its bind-completed annotation,
// or a Bound or Lost phase) proves a save now (issue 49).
func TestDecideTenantNamedOwnVolumeIsNoProofOfASave(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ts := metav1.NewTime(now)
	named := newClaim(func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName = testVolume; c.DeletionTimestamp = &ts })
	if got := Decide(Input{Claim: named, Volume: testVolume, Now: now}); got.Op != CleanUp {
		t.Errorf("deleted claim whose user named its own volume: %+v, want a clean-up", got)
	}
	bound := named.DeepCopy()
	bound.Status.Phase = v1.ClaimBound
	if got := Decide(Input{Claim: bound, Volume: testVolume, Now: now}); got.Op != Drop {
		t.Errorf("deleted claim a binder bound to its own volume: %+v, want the record dropped (its PV decides)", got)
	}
}
