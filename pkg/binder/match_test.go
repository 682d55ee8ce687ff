package binder

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestParseClaim(t *testing.T) {
	tests := []struct {
		name      string
		claim     *v1.PersistentVolumeClaim
		wantClass string
		wantMode  v1.PersistentVolumeMode
		wantVAC   string
		wantSel   bool
	}{
		{name: "claim with nothing set, Filesystem and class \"\"", claim: newPVC("c", "1Gi"),
			wantMode: v1.PersistentVolumeFilesystem},
		{name: "claim with storageClassName", claim: newPVC("c", "1Gi", claimClass("gold")),
			wantClass: "gold", wantMode: v1.PersistentVolumeFilesystem},
		{name: "claim with only the beta class annotation", claim: newPVC("c", "1Gi", claimAnn(v1.BetaStorageClassAnnotation, "silver")),
			wantClass: "silver", wantMode: v1.PersistentVolumeFilesystem},
		{name: "Block claim with an attributes class", claim: newPVC("c", "1Gi", claimVolumeMode(v1.PersistentVolumeBlock), claimVAC("fast")),
			wantMode: v1.PersistentVolumeBlock, wantVAC: "fast"},
		{name: "zero-size request is valid", claim: newPVC("c", "0"), wantMode: v1.PersistentVolumeFilesystem},
		{name: "claim with a selector", claim: newPVC("c", "1Gi", claimSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}})),
			wantMode: v1.PersistentVolumeFilesystem, wantSel: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := mustParse(t, tt.claim)
			if n.Class != tt.wantClass || n.Mode != tt.wantMode || n.VAC != tt.wantVAC || (n.Selector != nil) != tt.wantSel {
				t.Errorf("got class %q mode %q vac %q selector %v, want %q %q %q %v",
					n.Class, n.Mode, n.VAC, n.Selector, tt.wantClass, tt.wantMode, tt.wantVAC, tt.wantSel)
			}
			if n.Key() != "default/c" || n.UID != "uid-c" || n.Namespace != ns || n.Name != "c" {
				t.Errorf("got key %q uid %q", n.Key(), n.UID)
			}
		})
	}
}

// badClaims are claims no volume can satisfy; shared with the DecideClaim
// and Index tests. want is a fragment of ParseClaim's error.
var badClaims = []struct {
	name  string
	claim *v1.PersistentVolumeClaim
	want  string
}{
	{"claim with no storage request", newPVC("bad", "1Gi", claimNoRequest()), "requests no storage"},
	{"claim with an empty requests map", newPVC("bad", "1Gi", func(c *v1.PersistentVolumeClaim) {
		c.Spec.Resources.Requests = v1.ResourceList{}
	}), "requests no storage"},
	{"claim with a negative request", newPVC("bad", "1Gi", claimRequest("-1Gi")), "negative size"},
	{"claim with volumeMode Foo", newPVC("bad", "1Gi", claimVolumeMode("Foo")), `unknown volumeMode "Foo"`},
	{"claim with volumeMode \"\"", newPVC("bad", "1Gi", claimVolumeMode("")), "unknown volumeMode"},
	{"claim with selector operator Bogus", newPVC("bad", "1Gi", claimSelector(&metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus", Values: []string{"x"}}},
	})), "invalid label selector"},
	{"claim with selector In and no values", newPVC("bad", "1Gi", claimSelector(&metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn}},
	})), "invalid label selector"},
	{"claim with an invalid matchLabels value", newPVC("bad", "1Gi", claimSelector(&metav1.LabelSelector{
		MatchLabels: map[string]string{"a": "not a label value"},
	})), "invalid label selector"},
	{"claim with no access modes", newPVC("bad", "1Gi", claimModes()), "no access modes"},
	{"claim with several problems", newPVC("bad", "1Gi", claimNoRequest(), claimModes(), claimVolumeMode("Foo")), "; "},
}

func TestParseClaimBadInput(t *testing.T) {
	for _, tt := range badClaims {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseClaim(tt.claim)
			if err == nil {
				t.Fatal("ParseClaim: no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseClaim error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestSatisfies(t *testing.T) {
	tests := []struct {
		name  string
		pv    *v1.PersistentVolume
		claim *v1.PersistentVolumeClaim
		want  string // error fragment, "" for a match
	}{
		{"same class, big enough", newPV("v", "1Gi", pvClass("gold")), newPVC("c", "1Gi", claimClass("gold")), ""},
		{"larger volume satisfies", newPV("v", "10Gi"), newPVC("c", "1Gi"), ""},
		{"nil volumeMode on both sides is Filesystem", newPV("v", "1Gi"), newPVC("c", "1Gi"), ""},
		{"nil volumeMode on the volume, Filesystem on the claim", newPV("v", "1Gi"),
			newPVC("c", "1Gi", claimVolumeMode(v1.PersistentVolumeFilesystem)), ""},
		{"Filesystem volume, nil on the claim", newPV("v", "1Gi", pvVolumeMode(v1.PersistentVolumeFilesystem)), newPVC("c", "1Gi"), ""},
		{"class mismatch", newPV("v", "1Gi", pvClass("gold")), newPVC("c", "1Gi", claimClass("silver")), "storageClassName does not match"},
		{"class set on volume, claim without class", newPV("v", "1Gi", pvClass("gold")), newPVC("c", "1Gi"), "storageClassName"},
		{"class from the volume's beta annotation", newPV("v", "1Gi", pvAnn(v1.BetaStorageClassAnnotation, "gold")),
			newPVC("c", "1Gi", claimClass("gold")), ""},
		{"too small", newPV("v", "1Gi"), newPVC("c", "2Gi"), "too small"},
		{"1000M is smaller than 1Gi", newPV("v", "1000M"), newPVC("c", "1Gi"), "too small"},
		{"Block volume, nil (Filesystem) claim", newPV("v", "1Gi", pvVolumeMode(v1.PersistentVolumeBlock)), newPVC("c", "1Gi"), "volumeMode"},
		{"nil (Filesystem) volume, Block claim", newPV("v", "1Gi"), newPVC("c", "1Gi", claimVolumeMode(v1.PersistentVolumeBlock)), "volumeMode"},
		{"Block on both sides", newPV("v", "1Gi", pvVolumeMode(v1.PersistentVolumeBlock)),
			newPVC("c", "1Gi", claimVolumeMode(v1.PersistentVolumeBlock)), ""},
		{"access modes not covered", newPV("v", "1Gi", pvModes(rwo)), newPVC("c", "1Gi", claimModes(rwo, rwx)), "access modes"},
		{"access modes covered by a superset", newPV("v", "1Gi", pvModes(rwx, rwo, rox)), newPVC("c", "1Gi", claimModes(rwo, rwx)), ""},
		{"volume being deleted", newPV("v", "1Gi", pvDeleting()), newPVC("c", "1Gi"), "being deleted"},
		{"attributes class on the claim only", newPV("v", "1Gi"), newPVC("c", "1Gi", claimVAC("fast")), "volumeAttributesClassName"},
		{"attributes class on the volume only", newPV("v", "1Gi", pvVAC("fast")), newPVC("c", "1Gi"), "volumeAttributesClassName"},
		{"attributes classes differ", newPV("v", "1Gi", pvVAC("fast")), newPVC("c", "1Gi", claimVAC("slow")), "volumeAttributesClassName"},
		{"attributes class \"\" equals none", newPV("v", "1Gi", pvVAC("")), newPVC("c", "1Gi"), ""},
		{"same attributes class", newPV("v", "1Gi", pvVAC("fast")), newPVC("c", "1Gi", claimVAC("fast")), ""},
		{"volume with no capacity", newPV("v", "1Gi", func(pv *v1.PersistentVolume) { pv.Spec.Capacity = nil }),
			newPVC("c", "1Gi"), "too small"},
		{"selector is not checked for a named volume", newPV("v", "1Gi"),
			newPVC("c", "1Gi", claimSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}})), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Satisfies(tt.pv, mustParse(t, tt.claim))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Satisfies: %v, want a match", err)
			case tt.want != "" && err == nil:
				t.Errorf("Satisfies: match, want error with %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("Satisfies: %v, want error with %q", err, tt.want)
			}
		})
	}
}

func TestCandidate(t *testing.T) {
	sel := func(s *metav1.LabelSelector) pvcOpt { return claimSelector(s) }
	tests := []struct {
		name       string
		pv         *v1.PersistentVolume
		claim      *v1.PersistentVolumeClaim
		nodeLabels map[string]string
		want       bool
	}{
		{"Available volume is offered", newPV("v", "1Gi"), newPVC("c", "1Gi"), nil, true},
		{"new volume (phase \"\") is offered", newPV("v", "1Gi", pvPhase("")), newPVC("c", "1Gi"), nil, true},
		{"Pending volume is offered", newPV("v", "1Gi", pvPhase(v1.VolumePending)), newPVC("c", "1Gi"), nil, true},
		{"Released volume is not offered", newPV("v", "1Gi", pvPhase(v1.VolumeReleased)), newPVC("c", "1Gi"), nil, false},
		{"Failed volume is not offered", newPV("v", "1Gi", pvPhase(v1.VolumeFailed)), newPVC("c", "1Gi"), nil, false},
		{"Bound volume is not offered", newPV("v", "1Gi", pvPhase(v1.VolumeBound)), newPVC("c", "1Gi"), nil, false},
		{"volume claimed by another claim is not offered", newPV("v", "1Gi", pvClaimRef("other", "uid-other")), newPVC("c", "1Gi"), nil, false},
		{"volume pre-bound to this claim is not a free candidate", newPV("v", "1Gi", pvClaimRef("c", "")), newPVC("c", "1Gi"), nil, false},
		{"matchLabels selector matches", newPV("v", "1Gi", pvLabels("tier", "db", "zone", "a")),
			newPVC("c", "1Gi", sel(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}})), nil, true},
		{"matchLabels selector does not match", newPV("v", "1Gi", pvLabels("tier", "web")),
			newPVC("c", "1Gi", sel(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}})), nil, false},
		{"matchLabels selector, volume without labels", newPV("v", "1Gi"),
			newPVC("c", "1Gi", sel(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}})), nil, false},
		{"matchExpressions In matches", newPV("v", "1Gi", pvLabels("zone", "b")),
			newPVC("c", "1Gi", sel(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}})), nil, true},
		{"matchExpressions NotIn excludes", newPV("v", "1Gi", pvLabels("zone", "b")),
			newPVC("c", "1Gi", sel(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "zone", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b"}}}})), nil, false},
		{"matchExpressions DoesNotExist matches an unlabelled volume", newPV("v", "1Gi"),
			newPVC("c", "1Gi", sel(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "zone", Operator: metav1.LabelSelectorOpDoesNotExist}}})), nil, true},
		{"matchLabels and matchExpressions must both match", newPV("v", "1Gi", pvLabels("tier", "db")),
			newPVC("c", "1Gi", sel(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpExists}}})), nil, false},
		{"empty selector matches everything", newPV("v", "1Gi"), newPVC("c", "1Gi", sel(&metav1.LabelSelector{})), nil, true},
		{"too small", newPV("v", "1Gi"), newPVC("c", "2Gi"), nil, false},
		{"being deleted", newPV("v", "1Gi", pvDeleting()), newPVC("c", "1Gi"), nil, false},
		{"node affinity admits the node", newPV("v", "1Gi", pvNode("host", "n1")), newPVC("c", "1Gi"), map[string]string{"host": "n1"}, true},
		{"node affinity excludes the node", newPV("v", "1Gi", pvNode("host", "n1")), newPVC("c", "1Gi"), map[string]string{"host": "n2"}, false},
		{"node affinity, node without labels", newPV("v", "1Gi", pvNode("host", "n1")), newPVC("c", "1Gi"), map[string]string{}, false},
		{"no node affinity fits any node", newPV("v", "1Gi"), newPVC("c", "1Gi"), map[string]string{}, true},
		{"node affinity not checked without a node", newPV("v", "1Gi", pvNode("host", "n1")), newPVC("c", "1Gi"), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := candidate(tt.pv, mustParse(t, tt.claim), tt.nodeLabels); got != tt.want {
				t.Errorf("candidate = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPreBoundTo(t *testing.T) {
	claim := newPVC("c", "1Gi")
	tests := []struct {
		name string
		pv   *v1.PersistentVolume
		want bool
	}{
		{"no claimRef", newPV("v", "1Gi"), false},
		{"claimRef by name without UID", newPV("v", "1Gi", pvClaimRef("c", "")), true},
		{"claimRef with the claim's UID", newPV("v", "1Gi", pvClaimRef("c", "uid-c")), true},
		{"claimRef with another UID", newPV("v", "1Gi", pvClaimRef("c", "uid-old")), false},
		{"claimRef to another name", newPV("v", "1Gi", pvClaimRef("d", "")), false},
		{"claimRef to another namespace", newPV("v", "1Gi", pvClaimRef("c", ""), func(pv *v1.PersistentVolume) {
			pv.Spec.ClaimRef.Namespace = "other"
		}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PreBoundTo(tt.pv, mustParse(t, claim)); got != tt.want {
				t.Errorf("PreBoundTo = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSelectorNilWhenClaimHasNone(t *testing.T) {
	n := mustParse(t, newPVC("c", "1Gi"))
	if n.Selector != nil {
		t.Fatalf("Selector = %v, want nil", n.Selector)
	}
	n = mustParse(t, newPVC("c", "1Gi", claimSelector(&metav1.LabelSelector{})))
	if n.Selector == nil || !n.Selector.Matches(labels.Set{"any": "thing"}) {
		t.Fatalf("empty selector = %v, want one matching everything", n.Selector)
	}
}

func TestReject(t *testing.T) {
	node1 := map[string]string{"host": "n1"}
	sel := claimSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}})
	tests := []struct {
		name  string
		pv    *v1.PersistentVolume
		claim *v1.PersistentVolumeClaim
		delay bool
		node  map[string]string
		want  MismatchReason // "" for a match
	}{
		{"a fitting Available volume is a match", newPV("v", "1Gi"), newPVC("c", "1Gi"), false, nil, ""},
		{"claimed by another claim", newPV("v", "1Gi", pvClaimRef("other", "uid-other")), newPVC("c", "1Gi"), false, nil, MismatchClaimed},
		{"pre-bound to the claim by an old UID is another claim's", newPV("v", "1Gi", pvClaimRef("c", "uid-old")), newPVC("c", "1Gi"), false, nil, MismatchClaimed},
		{"pre-bound to the claim: class is not checked", newPV("v", "1Gi", pvClass("gold"), pvClaimRef("c", "")), newPVC("c", "1Gi"), false, nil, ""},
		{"pre-bound to the claim but too small", newPV("v", "1Gi", pvClaimRef("c", "")), newPVC("c", "2Gi"), false, nil, MismatchSize},
		{"pre-bound to the claim is taken before a node is selected", newPV("v", "1Gi", pvClaimRef("c", "")), newPVC("c", "1Gi"), true, nil, ""},
		{"delayed binding without a node", newPV("v", "1Gi"), newPVC("c", "1Gi"), true, nil, MismatchNoNode},
		{"delayed binding with the volume's node", newPV("v", "1Gi", pvNode("host", "n1")), newPVC("c", "1Gi"), true, node1, ""},
		{"delayed binding with another node", newPV("v", "1Gi", pvNode("host", "n2")), newPVC("c", "1Gi"), true, node1, MismatchNodeAffinity},
		{"other class", newPV("v", "1Gi", pvClass("gold")), newPVC("c", "1Gi", claimClass("silver")), false, nil, MismatchClass},
		{"class before size", newPV("v", "1Gi", pvClass("gold")), newPVC("c", "5Gi"), false, nil, MismatchClass},
		{"Block volume for a Filesystem claim", newPV("v", "1Gi", pvVolumeMode(v1.PersistentVolumeBlock)), newPVC("c", "1Gi"), false, nil, MismatchVolumeMode},
		{"access modes not covered", newPV("v", "1Gi"), newPVC("c", "1Gi", claimModes(rwx)), false, nil, MismatchAccessModes},
		{"Released volume without claimRef", newPV("v", "1Gi", pvPhase(v1.VolumeReleased)), newPVC("c", "1Gi"), false, nil, MismatchPhase},
		{"selector does not match", newPV("v", "1Gi", pvLabels("tier", "web")), newPVC("c", "1Gi", sel), false, nil, MismatchSelector},
		{"selector matches", newPV("v", "1Gi", pvLabels("tier", "db")), newPVC("c", "1Gi", sel), false, nil, ""},
		{"being deleted", newPV("v", "1Gi", pvDeleting()), newPVC("c", "1Gi"), false, nil, MismatchDeleting},
		{"too small", newPV("v", "1Gi"), newPVC("c", "2Gi"), false, nil, MismatchSize},
		{"attributes class differs", newPV("v", "1Gi", pvVAC("fast")), newPVC("c", "1Gi"), false, nil, MismatchVAC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := mustParse(t, tt.claim)
			m := Reject(tt.pv, MatchQuery{Needs: n, DelayBinding: tt.delay, NodeLabels: tt.node})
			switch {
			case tt.want == "" && m != nil:
				t.Errorf("Reject = %s (%s), want a match", m.Reason, m.Message)
			case tt.want != "" && m == nil:
				t.Errorf("Reject = match, want %s", tt.want)
			case m != nil && (m.Reason != tt.want || m.Message == ""):
				t.Errorf("Reject = %s (%q), want %s with words", m.Reason, m.Message, tt.want)
			}
		})
	}
}

// TestRejectAgreesWithIndex: over a pool of volumes, the index offers a
// volume exactly when Reject passes one, and only one Reject passes.
func TestRejectAgreesWithIndex(t *testing.T) {
	pool := []*v1.PersistentVolume{
		newPV("a-small", "1Gi", pvClass("gold")),
		newPV("b-big", "10Gi", pvClass("gold")),
		newPV("c-rwx", "5Gi", pvClass("gold"), pvModes(rwx, rwo)),
		newPV("d-block", "5Gi", pvClass("gold"), pvVolumeMode(v1.PersistentVolumeBlock)),
		newPV("e-db", "5Gi", pvClass("gold"), pvLabels("tier", "db")),
		newPV("f-node1", "5Gi", pvClass("local"), pvNode("host", "n1")),
		newPV("g-node2", "5Gi", pvClass("local"), pvNode("host", "n2")),
		newPV("h-pre", "5Gi", pvClass("gold"), pvClaimRef("pre", "")),
		newPV("i-released", "5Gi", pvClass("gold"), pvPhase(v1.VolumeReleased)),
		newPV("j-deleting", "20Gi", pvClass("gold"), pvDeleting()),
		newPV("k-fast", "5Gi", pvClass("gold"), pvVAC("fast")),
	}
	ix := NewIndex()
	for _, pv := range pool {
		ix.Upsert(pv)
	}
	queries := []struct {
		claim *v1.PersistentVolumeClaim
		delay bool
		node  map[string]string
	}{
		{claim: newPVC("c1", "1Gi", claimClass("gold"))},
		{claim: newPVC("c2", "2Gi", claimClass("gold"))},
		{claim: newPVC("c3", "20Gi", claimClass("gold"))},
		{claim: newPVC("c4", "1Gi", claimClass("gold"), claimModes(rwx))},
		{claim: newPVC("c5", "1Gi", claimClass("gold"), claimVolumeMode(v1.PersistentVolumeBlock))},
		{claim: newPVC("c6", "1Gi", claimClass("gold"), claimSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}}))},
		{claim: newPVC("c7", "1Gi", claimClass("gold"), claimVAC("fast"))},
		{claim: newPVC("pre", "1Gi", claimClass("gold"))},
		{claim: newPVC("c8", "1Gi", claimClass("local")), delay: true},
		{claim: newPVC("c9", "1Gi", claimClass("local")), delay: true, node: map[string]string{"host": "n2"}},
		{claim: newPVC("c10", "1Gi", claimClass("local")), delay: true, node: map[string]string{"host": "n3"}},
		{claim: newPVC("c11", "1Gi", claimClass("silver"))},
	}
	for _, tt := range queries {
		t.Run(tt.claim.Name, func(t *testing.T) {
			q := MatchQuery{Needs: mustParse(t, tt.claim), DelayBinding: tt.delay, NodeLabels: tt.node}
			var passed []string
			for _, pv := range pool {
				if Reject(pv, q) == nil {
					passed = append(passed, pv.Name)
				}
			}
			got := ix.Reserve(q)
			if got != nil {
				ix.Release(got.Name, q.Needs.UID)
			}
			switch {
			case got == nil && len(passed) > 0:
				t.Errorf("index offers nothing, Reject passes %v", passed)
			case got != nil && !slices.Contains(passed, got.Name):
				t.Errorf("index offers %s, Reject passes %v", got.Name, passed)
			}
		})
	}
}
