package binder

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The waiting notice (ExternalProvisioning, WaitForFirstConsumer) comes
// once a claim has waited WaitingEventsAfter, not only after it: a claim
// synced at exactly that age is told.
func TestWaitingNoticeAtWaitingEventsAfter(t *testing.T) {
	for _, c := range []struct {
		name   string
		waited time.Duration
		want   wantEvent
	}{
		{"just younger", WaitingEventsAfter - time.Nanosecond, wantEvent{}},
		{"exactly that old", WaitingEventsAfter, wantEvent{typ: v1.EventTypeNormal, reason: ReasonExternalProvisioning, msg: csiDriver}},
	} {
		t.Run(c.name, func(t *testing.T) {
			claim := newPVC("c", "1Gi", claimClass("gold"))
			needs, err := ParseClaim(claim)
			d := DecideClaim(ClaimInput{Claim: claim, Needs: needs, NeedsErr: err, Class: classGold, Waited: c.waited})
			checkClaimDecision(t, d, wantClaim{op: ClaimProvision, provisioner: csiDriver, event: c.want})
		})
	}
}

// The access-modes mismatch that Reject gives (and kubectl tether why
// shows) names both sides' modes, and "none" for a side without any.
func TestAccessModesMismatchNamesTheModes(t *testing.T) {
	for _, c := range []struct {
		name   string
		pv     []v1.PersistentVolumeAccessMode
		claim  []v1.PersistentVolumeAccessMode
		wantIn string
	}{
		{"both sides", []v1.PersistentVolumeAccessMode{rwo}, []v1.PersistentVolumeAccessMode{rwo, rwx}, "(volume ReadWriteOnce, claim ReadWriteOnce,ReadWriteMany)"},
		{"a volume without modes", nil, []v1.PersistentVolumeAccessMode{rwx}, "(volume none, claim ReadWriteMany)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			claim := newPVC("c", "1Gi", claimModes(c.claim...))
			needs, err := ParseClaim(claim)
			if err != nil {
				t.Fatal(err)
			}
			m := Reject(newPV("pv", "1Gi", pvModes(c.pv...)), MatchQuery{Needs: needs})
			if m == nil || m.Reason != MismatchAccessModes || !strings.Contains(m.Message, c.wantIn) {
				t.Fatalf("Reject = %+v, want %s naming %q", m, MismatchAccessModes, c.wantIn)
			}
		})
	}
}
