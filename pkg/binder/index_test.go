package binder

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestIndexReserve is the claim sync's search for an unbound claim with no
// volumeName: which volume, if any, Reserve offers.
func TestIndexReserve(t *testing.T) {
	selLabels := claimSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}})
	selExpr := claimSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}},
	}})
	node1 := map[string]string{"host": "n1"}
	tests := []struct {
		name  string
		pvs   []*v1.PersistentVolume
		claim *v1.PersistentVolumeClaim
		delay bool              // WaitForFirstConsumer class
		node  map[string]string // selected node's labels, nil for none
		want  string            // volume name, "" for no match
	}{
		{name: "unbound claim, smallest PV wins",
			pvs:   []*v1.PersistentVolume{newPV("pv-10g", "10Gi"), newPV("pv-1g", "1Gi"), newPV("pv-5g", "5Gi")},
			claim: newPVC("c", "2Gi"), want: "pv-5g"},
		{name: "unbound claim, exact size wins over larger",
			pvs:   []*v1.PersistentVolume{newPV("pv-10g", "10Gi"), newPV("pv-2g", "2Gi")},
			claim: newPVC("c", "2Gi"), want: "pv-2g"},
		{name: "unbound claim, units compared by value (2048Mi equals 2Gi, 2G is smaller)",
			pvs:   []*v1.PersistentVolume{newPV("pv-2G", "2G"), newPV("pv-2048Mi", "2048Mi"), newPV("pv-3Gi", "3Gi")},
			claim: newPVC("c", "2Gi"), want: "pv-2048Mi"},
		{name: "unbound claim, no PV big enough",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi"), newPV("pv-2g", "2Gi")},
			claim: newPVC("c", "3Gi"), want: ""},
		{name: "unbound claim, no PVs at all", claim: newPVC("c", "1Gi"), want: ""},
		{name: "unbound RWO claim, fewest access modes first: 5Gi [RWO] beats 1Gi [RWO,RWX]",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g-rwo-rwx", "1Gi", pvModes(rwo, rwx)), newPV("pv-5g-rwo", "5Gi", pvModes(rwo))},
			claim: newPVC("c", "1Gi"), want: "pv-5g-rwo"},
		{name: "unbound RWO claim, no PV in any group big enough",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g-rwo-rwx", "1Gi", pvModes(rwo, rwx)), newPV("pv-5g-rwo", "5Gi", pvModes(rwo))},
			claim: newPVC("c", "6Gi"), want: ""},
		{name: "unbound RWO claim, larger [RWO,RWX] PV taken when the [RWO] PV is too small",
			pvs:   []*v1.PersistentVolume{newPV("pv-10g-rwo-rwx", "10Gi", pvModes(rwo, rwx)), newPV("pv-5g-rwo", "5Gi", pvModes(rwo))},
			claim: newPVC("c", "6Gi"), want: "pv-10g-rwo-rwx"},
		{name: "unbound RWO claim, two-mode group before three-mode group",
			pvs: []*v1.PersistentVolume{newPV("pv-1g-3", "1Gi", pvModes(rwo, rox, rwx)),
				newPV("pv-5g-2", "5Gi", pvModes(rwo, rox)), newPV("pv-9g-2", "9Gi", pvModes(rwo, rwx))},
			claim: newPVC("c", "1Gi"), want: "pv-5g-2"},
		{name: "unbound RWO claim, duplicate access modes count once: 5Gi [RWO,RWO] beats 1Gi [RWO,RWX]",
			pvs:   []*v1.PersistentVolume{newPV("pv-5g-rwo", "5Gi", pvModes(rwo, rwo)), newPV("pv-1g-rwo-rwx", "1Gi", pvModes(rwx, rwo))},
			claim: newPVC("c", "1Gi"), want: "pv-5g-rwo"},
		{name: "unbound RWX claim, only the [RWO,RWX] PV covers it",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g-rwo-rwx", "1Gi", pvModes(rwo, rwx)), newPV("pv-5g-rwo", "5Gi", pvModes(rwo))},
			claim: newPVC("c", "1Gi", claimModes(rwx)), want: "pv-1g-rwo-rwx"},
		{name: "unbound claim, access modes not covered",
			pvs:   []*v1.PersistentVolume{newPV("pv-rwo", "5Gi", pvModes(rwo)), newPV("pv-rox", "5Gi", pvModes(rox))},
			claim: newPVC("c", "1Gi", claimModes(rwo, rox)), want: ""},
		{name: "unbound claim, equal size tie broken by name",
			pvs:   []*v1.PersistentVolume{newPV("pv-c", "1Gi"), newPV("pv-a", "1Gi"), newPV("pv-b", "1Gi")},
			claim: newPVC("c", "1Gi"), want: "pv-a"},
		{name: "pre-bound PV (claimRef without UID) wins outright even if larger",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi"), newPV("pv-100g", "100Gi", pvClaimRef("c", ""))},
			claim: newPVC("c", "1Gi"), want: "pv-100g"},
		{name: "pre-bound PV with the claim's UID wins outright even if larger",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi"), newPV("pv-100g", "100Gi", pvClaimRef("c", "uid-c"))},
			claim: newPVC("c", "1Gi"), want: "pv-100g"},
		{name: "pre-bound PV wins over a fewer-access-mode group (KCM would strand it)",
			pvs: []*v1.PersistentVolume{newPV("pv-rwo", "1Gi", pvModes(rwo)),
				newPV("pv-pre", "1Gi", pvModes(rwo, rwx), pvClaimRef("c", ""))},
			claim: newPVC("c", "1Gi"), want: "pv-pre"},
		{name: "pre-bound PV with another UID is not a match",
			pvs:   []*v1.PersistentVolume{newPV("pv-pre", "1Gi", pvClaimRef("c", "uid-old"))},
			claim: newPVC("c", "1Gi"), want: ""},
		{name: "pre-bound PV with another UID is skipped, free PV taken",
			pvs:   []*v1.PersistentVolume{newPV("pv-pre", "1Gi", pvClaimRef("c", "uid-old")), newPV("pv-free", "2Gi")},
			claim: newPVC("c", "1Gi"), want: "pv-free"},
		{name: "pre-bound PV in another namespace is not a match",
			pvs: []*v1.PersistentVolume{newPV("pv-pre", "1Gi", pvClaimRef("c", ""), func(pv *v1.PersistentVolume) {
				pv.Spec.ClaimRef.Namespace = "other"
			})},
			claim: newPVC("c", "1Gi"), want: ""},
		{name: "two pre-bound PVs, first by name",
			pvs:   []*v1.PersistentVolume{newPV("pv-b", "1Gi", pvClaimRef("c", "")), newPV("pv-a", "5Gi", pvClaimRef("c", ""))},
			claim: newPVC("c", "1Gi"), want: "pv-a"},
		{name: "pre-bound PV too small is no match, free PV taken",
			pvs:   []*v1.PersistentVolume{newPV("pv-pre", "1Gi", pvClaimRef("c", "")), newPV("pv-free", "5Gi")},
			claim: newPVC("c", "2Gi"), want: "pv-free"},
		{name: "pre-bound PV being deleted is no match",
			pvs:   []*v1.PersistentVolume{newPV("pv-pre", "1Gi", pvClaimRef("c", ""), pvDeleting())},
			claim: newPVC("c", "1Gi"), want: ""},
		{name: "pre-bound PV with the wrong volumeMode is no match",
			pvs:   []*v1.PersistentVolume{newPV("pv-pre", "1Gi", pvClaimRef("c", ""), pvVolumeMode(v1.PersistentVolumeBlock))},
			claim: newPVC("c", "1Gi"), want: ""},
		{name: "PV claimed by another claim is never offered",
			pvs:   []*v1.PersistentVolume{newPV("pv-taken", "1Gi", pvClaimRef("other", "uid-other"), pvPhase(v1.VolumeBound))},
			claim: newPVC("c", "1Gi"), want: ""},
		{name: "PV pre-bound to another claim (no UID) is never offered",
			pvs:   []*v1.PersistentVolume{newPV("pv-taken", "1Gi", pvClaimRef("other", ""))},
			claim: newPVC("c", "1Gi"), want: ""},
		{name: "class mismatch",
			pvs:   []*v1.PersistentVolume{newPV("pv-gold", "1Gi", pvClass("gold"))},
			claim: newPVC("c", "1Gi", claimClass("silver")), want: ""},
		{name: "claim without class takes only class \"\" PVs",
			pvs:   []*v1.PersistentVolume{newPV("pv-gold", "1Gi", pvClass("gold")), newPV("pv-none", "5Gi")},
			claim: newPVC("c", "1Gi"), want: "pv-none"},
		{name: "claim with class takes its class only",
			pvs:   []*v1.PersistentVolume{newPV("pv-gold", "5Gi", pvClass("gold")), newPV("pv-none", "1Gi")},
			claim: newPVC("c", "1Gi", claimClass("gold")), want: "pv-gold"},
		{name: "volumeMode mismatch: Block PV, Filesystem (nil) claim",
			pvs:   []*v1.PersistentVolume{newPV("pv-block", "1Gi", pvVolumeMode(v1.PersistentVolumeBlock))},
			claim: newPVC("c", "1Gi"), want: ""},
		{name: "volumeMode mismatch: Filesystem (nil) PV, Block claim",
			pvs:   []*v1.PersistentVolume{newPV("pv-fs", "1Gi")},
			claim: newPVC("c", "1Gi", claimVolumeMode(v1.PersistentVolumeBlock)), want: ""},
		{name: "volumeMode nil PV matches an explicit Filesystem claim",
			pvs:   []*v1.PersistentVolume{newPV("pv-fs", "1Gi")},
			claim: newPVC("c", "1Gi", claimVolumeMode(v1.PersistentVolumeFilesystem)), want: "pv-fs"},
		{name: "volumeMode explicit Filesystem PV matches a nil claim",
			pvs:   []*v1.PersistentVolume{newPV("pv-fs", "1Gi", pvVolumeMode(v1.PersistentVolumeFilesystem))},
			claim: newPVC("c", "1Gi"), want: "pv-fs"},
		{name: "Block claim takes the Block PV, not the smaller Filesystem one",
			pvs: []*v1.PersistentVolume{newPV("pv-fs", "1Gi"),
				newPV("pv-block", "5Gi", pvVolumeMode(v1.PersistentVolumeBlock))},
			claim: newPVC("c", "1Gi", claimVolumeMode(v1.PersistentVolumeBlock)), want: "pv-block"},
		{name: "selector matchLabels picks the labelled PV",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi", pvLabels("tier", "web")), newPV("pv-5g", "5Gi", pvLabels("tier", "db"))},
			claim: newPVC("c", "1Gi", selLabels), want: "pv-5g"},
		{name: "selector matchLabels, nothing labelled",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi")},
			claim: newPVC("c", "1Gi", selLabels), want: ""},
		{name: "selector matchExpressions picks the PV in zone b",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi", pvLabels("zone", "c")), newPV("pv-5g", "5Gi", pvLabels("zone", "b"))},
			claim: newPVC("c", "1Gi", selExpr), want: "pv-5g"},
		{name: "PV being deleted is skipped",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi", pvDeleting()), newPV("pv-5g", "5Gi")},
			claim: newPVC("c", "1Gi"), want: "pv-5g"},
		{name: "PV too small is skipped",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi"), newPV("pv-5g", "5Gi")},
			claim: newPVC("c", "1500Mi"), want: "pv-5g"},
		{name: "VolumeAttributesClassName mismatch",
			pvs:   []*v1.PersistentVolume{newPV("pv-fast", "1Gi", pvVAC("fast")), newPV("pv-none", "1Gi")},
			claim: newPVC("c", "1Gi", claimVAC("slow")), want: ""},
		{name: "VolumeAttributesClassName match",
			pvs:   []*v1.PersistentVolume{newPV("pv-none", "1Gi"), newPV("pv-fast", "5Gi", pvVAC("fast"))},
			claim: newPVC("c", "1Gi", claimVAC("fast")), want: "pv-fast"},
		{name: "Released PV not offered",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi", pvPhase(v1.VolumeReleased)), newPV("pv-5g", "5Gi")},
			claim: newPVC("c", "1Gi"), want: "pv-5g"},
		{name: "Failed PV not offered",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi", pvPhase(v1.VolumeFailed))},
			claim: newPVC("c", "1Gi"), want: ""},
		{name: "new PV (phase \"\") offered",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi", pvPhase(""))},
			claim: newPVC("c", "1Gi"), want: "pv-1g"},
		{name: "Pending PV offered",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi", pvPhase(v1.VolumePending))},
			claim: newPVC("c", "1Gi"), want: "pv-1g"},
		{name: "WaitForFirstConsumer without node, free PV not taken",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi")},
			claim: newPVC("c", "1Gi"), delay: true, want: ""},
		{name: "WaitForFirstConsumer without node, pre-bound PV taken",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi"), newPV("pv-pre", "5Gi", pvClaimRef("c", ""), pvNode("host", "n9"))},
			claim: newPVC("c", "1Gi"), delay: true, want: "pv-pre"},
		{name: "WaitForFirstConsumer with node, PV excluding the node rejected",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g-n2", "1Gi", pvNode("host", "n2")), newPV("pv-5g-n1", "5Gi", pvNode("host", "n1", "n3"))},
			claim: newPVC("c", "1Gi"), delay: true, node: node1, want: "pv-5g-n1"},
		{name: "WaitForFirstConsumer with node, PV without affinity taken",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g-n2", "1Gi", pvNode("host", "n2")), newPV("pv-5g", "5Gi")},
			claim: newPVC("c", "1Gi"), delay: true, node: node1, want: "pv-5g"},
		{name: "WaitForFirstConsumer with node, no PV admits it",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g-n2", "1Gi", pvNode("host", "n2"))},
			claim: newPVC("c", "1Gi"), delay: true, node: node1, want: ""},
		{name: "WaitForFirstConsumer with a node that has no labels, only PVs without affinity",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g-n1", "1Gi", pvNode("host", "n1")), newPV("pv-5g", "5Gi")},
			claim: newPVC("c", "1Gi"), delay: true, node: map[string]string{}, want: "pv-5g"},
		{name: "WaitForFirstConsumer with node, pre-bound PV admitting it wins",
			pvs:   []*v1.PersistentVolume{newPV("pv-1g", "1Gi"), newPV("pv-pre", "5Gi", pvClaimRef("c", ""), pvNode("host", "n1"))},
			claim: newPVC("c", "1Gi"), delay: true, node: node1, want: "pv-pre"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := indexOf(tt.pvs...)
			q := MatchQuery{Needs: mustParse(t, tt.claim), DelayBinding: tt.delay, NodeLabels: tt.node}
			if got := nameOf(ix.Reserve(q)); got != tt.want {
				t.Errorf("Reserve = %q, want %q", got, tt.want)
			}
		})
	}
}

func query(t testing.TB, claim string, size string) MatchQuery {
	return MatchQuery{Needs: mustParse(t, newPVC(claim, size))}
}

func TestIndexReservations(t *testing.T) {
	ix := indexOf(newPV("pv-1", "1Gi"), newPV("pv-2", "2Gi"))
	a, b, c := query(t, "a", "1Gi"), query(t, "b", "1Gi"), query(t, "c", "1Gi")

	if got := nameOf(ix.Reserve(a)); got != "pv-1" {
		t.Fatalf("claim a: Reserve = %q, want pv-1", got)
	}
	if got := nameOf(ix.Reserve(a)); got != "pv-1" {
		t.Fatalf("claim a again: Reserve = %q, want its own reservation pv-1", got)
	}
	if got := nameOf(ix.Reserve(b)); got != "pv-2" {
		t.Fatalf("claim b while a holds pv-1: Reserve = %q, want the next PV pv-2", got)
	}
	if got := nameOf(ix.Reserve(c)); got != "" {
		t.Fatalf("claim c while both are reserved: Reserve = %q, want none", got)
	}
	ix.Release("pv-1", b.Needs.UID) // not b's reservation: no effect
	if got := nameOf(ix.Reserve(c)); got != "" {
		t.Fatalf("claim c after a release by the wrong claim: Reserve = %q, want none", got)
	}
	ix.Release("pv-1", a.Needs.UID)
	ix.Release("pv-2", b.Needs.UID)
	if got := nameOf(ix.Reserve(b)); got != "pv-1" {
		t.Fatalf("claim b after a released pv-1: Reserve = %q, want pv-1", got)
	}
	ix.Release("pv-1", b.Needs.UID)
	ix.Release("pv-9", b.Needs.UID) // unknown volume: no effect
	if got := nameOf(ix.Reserve(c)); got != "pv-1" {
		t.Fatalf("claim c after all releases: Reserve = %q, want pv-1", got)
	}
}

func TestIndexReservationOfPreBoundVolume(t *testing.T) {
	// A recreated claim (new UID) does not take a volume reserved by the
	// old one, even though it is pre-bound by name.
	ix := indexOf(newPV("pv-pre", "1Gi", pvClaimRef("c", "")))
	old := MatchQuery{Needs: mustParse(t, newPVC("c", "1Gi", claimUID("uid-old")))}
	recreated := MatchQuery{Needs: mustParse(t, newPVC("c", "1Gi", claimUID("uid-new")))}
	if got := nameOf(ix.Reserve(old)); got != "pv-pre" {
		t.Fatalf("Reserve = %q, want pv-pre", got)
	}
	if got := nameOf(ix.Reserve(recreated)); got != "" {
		t.Fatalf("recreated claim: Reserve = %q, want none while reserved", got)
	}
	ix.Release("pv-pre", old.Needs.UID)
	if got := nameOf(ix.Reserve(recreated)); got != "pv-pre" {
		t.Fatalf("recreated claim after release: Reserve = %q, want pv-pre", got)
	}
}

func TestIndexUpsert(t *testing.T) {
	q := query(t, "c", "1Gi")
	tests := []struct {
		name     string
		upserts  []*v1.PersistentVolume
		wantRV   string // of the held version of "pv"
		wantPV   string // Reserve's answer for claim c (1Gi)
		wantHeld int    // Len
		returned []int  // the upserts made through Returned (a write's answer), not Upsert
		wantCopy int    // when > 0, Get must answer that upsert's object (1-based)
	}{
		{name: "newer version replaces the older",
			upserts: []*v1.PersistentVolume{newPV("pv", "1Gi", pvRV("5")), newPV("pv", "1Gi", pvRV("6"), pvLabels("a", "b"))},
			wantRV:  "6", wantPV: "pv", wantHeld: 1},
		{name: "older version is ignored",
			upserts: []*v1.PersistentVolume{newPV("pv", "1Gi", pvRV("10")), newPV("pv", "1Gi", pvRV("9"), pvClaimRef("x", "uid-x"))},
			wantRV:  "10", wantPV: "pv", wantHeld: 1},
		{name: "same version from a write keeps the held copy",
			upserts:  []*v1.PersistentVolume{newPV("pv", "1Gi", pvRV("10")), newPV("pv", "1Gi", pvRV("10"), pvPhase(v1.VolumeReleased))},
			returned: []int{1}, wantRV: "10", wantPV: "pv", wantHeld: 1, wantCopy: 1},
		{name: "same version from the informer replaces the write's copy",
			upserts:  []*v1.PersistentVolume{newPV("pv", "1Gi", pvRV("10")), newPV("pv", "1Gi", pvRV("10"), pvLabels("a", "b"))},
			returned: []int{0}, wantRV: "10", wantPV: "pv", wantHeld: 1, wantCopy: 2},
		{name: "same version of a claimed volume from the informer replaces the write's copy",
			upserts:  []*v1.PersistentVolume{newPV("pv", "1Gi", pvRV("10"), pvClaimRef("x", "uid-x")), newPV("pv", "1Gi", pvRV("10"), pvClaimRef("x", "uid-x"))},
			returned: []int{0}, wantRV: "10", wantPV: "", wantHeld: 1, wantCopy: 2},
		{name: "older version from a write is ignored",
			upserts:  []*v1.PersistentVolume{newPV("pv", "1Gi", pvRV("10")), newPV("pv", "1Gi", pvRV("9"), pvClaimRef("x", "uid-x"))},
			returned: []int{1}, wantRV: "10", wantPV: "pv", wantHeld: 1, wantCopy: 1},
		{name: "versions compare as numbers, not strings",
			upserts: []*v1.PersistentVolume{newPV("pv", "1Gi", pvRV("9")), newPV("pv", "1Gi", pvRV("10"), pvPhase(v1.VolumeFailed))},
			wantRV:  "10", wantPV: "", wantHeld: 1},
		{name: "volume claimed by a newer version is no longer offered",
			upserts: []*v1.PersistentVolume{newPV("pv", "1Gi", pvRV("1")), newPV("pv", "1Gi", pvRV("2"), pvClaimRef("other", "uid-other"))},
			wantRV:  "2", wantPV: "", wantHeld: 1},
		{name: "volume unbound by a newer version is offered again",
			upserts: []*v1.PersistentVolume{newPV("pv", "1Gi", pvRV("1"), pvClaimRef("other", "uid-other")), newPV("pv", "1Gi", pvRV("2"))},
			wantRV:  "2", wantPV: "pv", wantHeld: 1},
		{name: "volume grown by a newer version is re-sorted",
			upserts: []*v1.PersistentVolume{newPV("pv", "1Gi", pvRV("1")), newPV("pv-2g", "2Gi"), newPV("pv", "3Gi", pvRV("2"))},
			wantRV:  "2", wantPV: "pv-2g", wantHeld: 2},
		{name: "volume moved to another class leaves the old group",
			upserts: []*v1.PersistentVolume{newPV("pv", "1Gi", pvRV("1")), newPV("pv", "1Gi", pvRV("2"), pvClass("gold"))},
			wantRV:  "2", wantPV: "", wantHeld: 1},
		{name: "access modes changed by a newer version move the volume between groups",
			upserts: []*v1.PersistentVolume{newPV("pv", "1Gi", pvRV("1"), pvModes(rox)), newPV("pv", "1Gi", pvRV("2"), pvModes(rwx, rwo))},
			wantRV:  "2", wantPV: "pv", wantHeld: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := NewIndex()
			var held *v1.PersistentVolume
			for i, pv := range tt.upserts {
				put := ix.Upsert
				if slices.Contains(tt.returned, i) {
					put = ix.Returned
				}
				h := put(pv)
				if pv.Name == "pv" {
					held = h
				}
			}
			if tt.wantCopy > 0 {
				if got, _ := ix.Get("pv"); got != tt.upserts[tt.wantCopy-1] || held != got {
					t.Errorf("the index holds another copy than upsert %d's", tt.wantCopy)
				}
			}
			if held.ResourceVersion != tt.wantRV {
				t.Errorf("last Upsert returned version %s, want %s", held.ResourceVersion, tt.wantRV)
			}
			if got, ok := ix.Get("pv"); !ok || got.ResourceVersion != tt.wantRV {
				t.Errorf("Get = %v %v, want version %s", got, ok, tt.wantRV)
			}
			if got := nameOf(ix.Reserve(q)); got != tt.wantPV {
				t.Errorf("Reserve = %q, want %q", got, tt.wantPV)
			}
			if ix.Len() != tt.wantHeld || len(ix.List()) != tt.wantHeld {
				t.Errorf("Len = %d, List has %d, want %d", ix.Len(), len(ix.List()), tt.wantHeld)
			}
		})
	}
}

func TestIndexDelete(t *testing.T) {
	q := query(t, "c", "1Gi")
	type step struct {
		del bool // Delete instead of Upsert
		pv  *v1.PersistentVolume
	}
	tests := []struct {
		name    string
		steps   []step
		wantRV  string // held version of "pv", "" for none
		wantPV  string // Reserve's answer
		wantLen int
	}{
		{name: "delete forgets the volume",
			steps:  []step{{pv: newPV("pv", "1Gi", pvRV("5"))}, {del: true, pv: newPV("pv", "1Gi", pvRV("6"))}},
			wantRV: "", wantPV: "", wantLen: 0},
		{name: "delete then a late upsert of the old version does not resurrect it",
			steps: []step{{pv: newPV("pv", "1Gi", pvRV("5"))}, {del: true, pv: newPV("pv", "1Gi", pvRV("6"))},
				{pv: newPV("pv", "1Gi", pvRV("5"))}},
			wantRV: "", wantPV: "", wantLen: 0},
		{name: "delete then an upsert of the deleted version itself does not resurrect it",
			steps: []step{{pv: newPV("pv", "1Gi", pvRV("5"))}, {del: true, pv: newPV("pv", "1Gi", pvRV("6"))},
				{pv: newPV("pv", "1Gi", pvRV("6"))}},
			wantRV: "", wantPV: "", wantLen: 0},
		{name: "delete of a never-seen volume still buries its old versions",
			steps:  []step{{del: true, pv: newPV("pv", "1Gi", pvRV("6"))}, {pv: newPV("pv", "1Gi", pvRV("4"))}},
			wantRV: "", wantPV: "", wantLen: 0},
		{name: "recreated volume (newer version, new UID) is accepted after delete",
			steps: []step{{pv: newPV("pv", "1Gi", pvRV("5"))}, {del: true, pv: newPV("pv", "1Gi", pvRV("6"))},
				{pv: newPV("pv", "1Gi", pvRV("7"), pvUID("pv-uid-new"))}},
			wantRV: "7", wantPV: "pv", wantLen: 1},
		{name: "late delete of the old object keeps the recreated one",
			steps: []step{{pv: newPV("pv", "1Gi", pvRV("5"))}, {pv: newPV("pv", "1Gi", pvRV("7"), pvUID("pv-uid-new"))},
				{del: true, pv: newPV("pv", "1Gi", pvRV("6"))}},
			wantRV: "7", wantPV: "pv", wantLen: 1},
		{name: "delete of a claimed volume forgets it too",
			steps: []step{{pv: newPV("pv", "1Gi", pvRV("5"), pvClaimRef("c", ""))}, {del: true, pv: newPV("pv", "1Gi", pvRV("6"), pvClaimRef("c", ""))},
				{pv: newPV("pv", "1Gi", pvRV("5"), pvClaimRef("c", ""))}},
			wantRV: "", wantPV: "", wantLen: 0},
		{name: "delete of one volume leaves its group's others",
			steps:  []step{{pv: newPV("pv", "1Gi")}, {pv: newPV("pv-b", "1Gi")}, {del: true, pv: newPV("pv", "1Gi", pvRV("2"))}},
			wantRV: "", wantPV: "pv-b", wantLen: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := NewIndex()
			for _, s := range tt.steps {
				if s.del {
					ix.Delete(s.pv)
				} else {
					ix.Upsert(s.pv)
				}
			}
			got, ok := ix.Get("pv")
			if tt.wantRV == "" && ok {
				t.Errorf("Get = version %s, want the volume gone", got.ResourceVersion)
			} else if tt.wantRV != "" && (!ok || got.ResourceVersion != tt.wantRV) {
				t.Errorf("Get = %v %v, want version %s", got, ok, tt.wantRV)
			}
			if got := nameOf(ix.Reserve(q)); got != tt.wantPV {
				t.Errorf("Reserve = %q, want %q", got, tt.wantPV)
			}
			if ix.Len() != tt.wantLen {
				t.Errorf("Len = %d, want %d", ix.Len(), tt.wantLen)
			}
		})
	}
}

func TestIndexDeleteDropsReservation(t *testing.T) {
	ix := indexOf(newPV("pv", "1Gi", pvRV("1")))
	a, b := query(t, "a", "1Gi"), query(t, "b", "1Gi")
	if ix.Reserve(a) == nil {
		t.Fatal("claim a: no volume")
	}
	ix.Delete(newPV("pv", "1Gi", pvRV("2")))
	ix.Upsert(newPV("pv", "1Gi", pvRV("3"), pvUID("pv-uid-new")))
	if got := nameOf(ix.Reserve(b)); got != "pv" {
		t.Fatalf("claim b on the recreated volume: Reserve = %q, want pv (the old reservation died with the old volume)", got)
	}
}

func TestNewer(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"2", "1", true}, {"1", "2", false}, {"1", "1", false}, {"10", "9", true},
		{"x", "1", true}, {"1", "x", true}, {"x", "x", false}, {"", "", false}, {"1", "", true},
	}
	for _, tt := range tests {
		if got := newer(tt.a, tt.b); got != tt.want {
			t.Errorf("newer(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestIndexConcurrentReserve has many claims race for fewer volumes: each
// volume goes to at most one claim. Run with -race.
func TestIndexConcurrentReserve(t *testing.T) {
	const volumes, claims = 64, 512
	ix := NewIndex()
	for i := range volumes {
		ix.Upsert(newPV(fmt.Sprintf("pv-%03d", i), fmt.Sprintf("%dGi", 1+i%4)))
	}
	var (
		mu       sync.Mutex
		owner    = map[string]string{}
		problems []string
		wg       sync.WaitGroup
	)
	queries := make([]MatchQuery, claims)
	for i := range queries {
		queries[i] = MatchQuery{Needs: mustParse(t, newPVC(fmt.Sprintf("claim-%03d", i), "1Gi"))}
	}
	for _, q := range queries {
		wg.Go(func() {
			name := q.Needs.Name
			pv := ix.Reserve(q)
			if pv == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if prev, taken := owner[pv.Name]; taken {
				problems = append(problems, fmt.Sprintf("%s reserved by both %s and %s", pv.Name, prev, name))
			}
			owner[pv.Name] = name
		})
	}
	wg.Wait()
	for _, e := range problems {
		t.Error(e)
	}
	if len(owner) != volumes {
		t.Errorf("%d volumes reserved, want all %d", len(owner), volumes)
	}
}

// TestIndexConcurrentReserveRelease churns: claims reserve, hold, release
// and reserve again while volumes are updated, and a volume is never held
// by two claims at once.
func TestIndexConcurrentReserveRelease(t *testing.T) {
	const volumes, workers, rounds = 16, 48, 200
	ix := NewIndex()
	for i := range volumes {
		ix.Upsert(newPV(fmt.Sprintf("pv-%02d", i), "1Gi"))
	}
	holders := make([]atomic.Int64, volumes) // worker+1 holding volume i, 0 for none
	var wg sync.WaitGroup
	var double atomic.Int64
	for w := range workers {
		q := MatchQuery{Needs: mustParse(t, newPVC(fmt.Sprintf("claim-%02d", w), "1Gi"))}
		wg.Go(func() {
			for range rounds {
				pv := ix.Reserve(q)
				if pv == nil {
					continue
				}
				var i int
				fmt.Sscanf(pv.Name, "pv-%d", &i)
				if !holders[i].CompareAndSwap(0, int64(w+1)) {
					double.Add(1)
				}
				holders[i].Store(0)
				ix.Release(pv.Name, q.Needs.UID)
			}
		})
	}
	wg.Go(func() { // an informer delivering newer versions meanwhile
		for rv := 2; rv < rounds; rv++ {
			ix.Upsert(newPV(fmt.Sprintf("pv-%02d", rv%volumes), "1Gi", pvRV(fmt.Sprint(rv))))
			_ = ix.List()
		}
	})
	wg.Wait()
	if n := double.Load(); n > 0 {
		t.Fatalf("a volume was held by two claims at once %d times", n)
	}
}

func BenchmarkIndexReserve(b *testing.B) {
	const volumes = 10000
	ix := NewIndex()
	for i := range volumes {
		ix.Upsert(newPV(fmt.Sprintf("pv-%05d", i), fmt.Sprintf("%dMi", 1+i), pvClass("gold")))
	}
	queries := make([]MatchQuery, 1024)
	for i := range queries {
		queries[i] = MatchQuery{Needs: mustParse(b, newPVC(fmt.Sprintf("c-%d", i), fmt.Sprintf("%dMi", 1+(i*97)%volumes), claimClass("gold")))}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := queries[i%len(queries)]
		pv := ix.Reserve(q)
		if pv == nil {
			b.Fatal("no volume")
		}
		ix.Release(pv.Name, q.Needs.UID)
	}
}
