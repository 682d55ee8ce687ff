package records

import (
	"testing"
	"time"

	"github.com/tether-csi/tether/pkg/inflight"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOwnerOf(t *testing.T) {
	claim := func(selected, recorded string) *v1.PersistentVolumeClaim {
		c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{}}}
		if selected != "" {
			c.Annotations["volume.kubernetes.io/selected-node"] = selected
		}
		if recorded != "" {
			c.Annotations[inflight.AnnNode] = recorded
		}
		return c
	}
	central, node1 := "", "node-1"
	tests := []struct {
		name  string
		here  string
		claim *v1.PersistentVolumeClaim
		owner Owner
		moved bool
	}{
		{"centralised provisioner, any claim", central, claim("node-2", ""), OwnedHere, false},
		{"centralised provisioner, no node", central, claim("", ""), OwnedHere, false},
		{"node mode, this node's record", node1, claim("node-1", "node-1"), OwnedHere, false},
		{"node mode, this node's record, claim rescheduled", node1, claim("", "node-1"), OwnedHere, true},
		{"node mode, this node's record, claim now on node-2", node1, claim("node-2", "node-1"), OwnedHere, true},
		{"node mode, an older record: the selected node's", node1, claim("node-1", ""), OwnedHere, false},
		{"node mode, another node's record (the chaos leak)", node1, claim("node-1", "node-2"), OwnedElsewhere, false},
		{"node mode, an older record of another node", node1, claim("node-2", ""), OwnedElsewhere, false},
		{"node mode, no node at all", node1, claim("", ""), OwnedByNone, false},
	}
	for _, tt := range tests {
		if owner, moved := OwnerOf(tt.claim, tt.here); owner != tt.owner || moved != tt.moved {
			t.Errorf("%s: got %v %v, want %v %v", tt.name, owner, moved, tt.owner, tt.moved)
		}
	}
}

func TestSettleWait(t *testing.T) {
	saved := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", CreationTimestamp: metav1.NewTime(saved)}}
	claim := func(volumeName string, deleting bool) *v1.PersistentVolumeClaim {
		c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1.PersistentVolumeClaimSpec{VolumeName: volumeName}}
		if deleting {
			c.DeletionTimestamp = &metav1.Time{Time: saved}
		}
		return c
	}
	tests := []struct {
		name  string
		claim *v1.PersistentVolumeClaim
		now   time.Time
		want  time.Duration
	}{
		{"just saved, not bound: left for the binder", claim("", false), saved.Add(time.Second), BinderGrace - time.Second},
		{"grace over", claim("", false), saved.Add(BinderGrace), 0},
		{"long after", claim("", false), saved.Add(time.Hour), 0},
		{"bound by a binder that left the record", claim("pvc-1", false), saved, 0},
		{"claim being deleted", claim("", true), saved, 0},
	}
	for _, tt := range tests {
		if got := BinderWait(tt.claim, pv, tt.now); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The save grace ends at SaveGrace: a record whose PV was handed to the
// library exactly that long ago, with no PV saved, is cleaned up.
func TestSettleSaveGraceEndsAtSaveGrace(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	deleted := newClaim(func(c *v1.PersistentVolumeClaim) { ts := metav1.NewTime(now); c.DeletionTimestamp = &ts })
	for _, c := range []struct {
		name string
		ago  time.Duration
		want Step
	}{
		{"just within", SaveGrace - time.Nanosecond, Step{Op: Requeue, Wait: SaveRecheck}},
		{"exactly over", SaveGrace, Step{Op: CleanUp}},
	} {
		in := Input{Claim: deleted, Volume: testVolume, HandedOff: now.Add(-c.ago), Owner: OwnedHere, Now: now}
		if got := Decide(in); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// Volume takes the record's own name only when it is a volume of
// this very claim (ending in its whole UID) and a valid PV name; any other
// stands for the name derived under this provisioner's settings.
func TestVolumeTakesOnlyThisClaimsValidName(t *testing.T) {
	derived := "pvc-" + testUID
	for _, c := range []struct {
		name, record, want string
	}{
		{"no record", "", derived},
		{"the derived name", derived, derived},
		{"made under another --volume-name-prefix", "old-" + testUID, "old-" + testUID},
		{"another claim's volume (forged)", "pvc-0a9d1c2e-6a1b-4c8d-9e0f-112233445566", derived},
		{"ending in the UID but no PV name", "Old_Prefix-" + testUID, derived},
	} {
		claim := newClaim()
		if c.record != "" {
			inflight.Record(claim, driverNm, c.record)
		}
		if got := Volume(claim, "pvc", 0); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A claim whose PV is being saved is looked at again after a wait, not at
// once in a loop until the save grace ends.
func TestSettleRechecksASaveAfterAWait(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	deleted := newClaim(func(c *v1.PersistentVolumeClaim) { ts := metav1.NewTime(now); c.DeletionTimestamp = &ts })
	got := Decide(Input{Claim: deleted, Volume: testVolume, HandedOff: now.Add(-time.Second), Owner: OwnedHere, Now: now})
	if got.Op != Requeue || got.Wait < time.Second {
		t.Errorf("%+v, want Requeue with a wait of a second or more", got)
	}
}

// ElsewhereNode names another node's record only in node-deployment mode,
// only for a claim that holds a record, and never this node.
func TestElsewhereNode(t *testing.T) {
	held := func(node string) *v1.PersistentVolumeClaim {
		c := newClaim()
		inflight.Record(c, driverNm, testVolume)
		if node != "" {
			c.Annotations[inflight.AnnNode] = node
		}
		return c
	}
	for _, tt := range []struct {
		name, here string
		claim      *v1.PersistentVolumeClaim
		want       string
	}{
		{"not node mode", "", held("node-2"), ""},
		{"no record", "node-1", newClaim(), ""},
		{"this node's record", "node-1", held("node-1"), ""},
		{"a record without a node", "node-1", held(""), ""},
		{"another node's record", "node-1", held("node-2"), "node-2"},
	} {
		if got := ElsewhereNode(tt.claim, tt.here); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
