package diff

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCompare(t *testing.T) {
	s := &Scenario{Seed: 9, Namespace: testNS}
	a := &Analysis{
		Claims: []ClaimExpectation{
			{Name: "fixed", PhaseKnown: true, Phase: corev1.ClaimBound, VolumeKnown: true, Volume: "p1"},
			{Name: "tie", PhaseKnown: true, Phase: corev1.ClaimBound, Candidates: []string{"p2", "p3"}},
			{Name: "free", Why: "undetermined"},
			{Name: "none", PhaseKnown: true, Phase: corev1.ClaimPending, VolumeKnown: true},
		},
		PVs: []PVExpectation{
			{Name: "p1", PhaseKnown: true, Phase: corev1.VolumeBound},
			{Name: "p2"}, {Name: "p3"}, {Name: "p4"},
		},
	}
	bound := func(uid, pv string) ClaimState { return ClaimState{Phase: corev1.ClaimBound, Volume: pv, UID: uid} }
	boundPV := func(claim, uid string) PVState {
		return PVState{Phase: corev1.VolumeBound, ClaimRef: testNS + "/" + claim, ClaimUID: uid}
	}
	avail := PVState{Phase: corev1.VolumeAvailable}
	pending := ClaimState{Phase: corev1.ClaimPending}
	kcm := Observed{
		Claims: map[string]ClaimState{"fixed": bound("u1", "p1"), "tie": bound("u2", "p2"), "free": bound("u3", "p4"), "none": pending},
		PVs:    map[string]PVState{"p1": boundPV("fixed", "u1"), "p2": boundPV("tie", "u2"), "p3": avail, "p4": boundPV("free", "u3")},
	}

	tests := []struct {
		name   string
		change func(o *Observed)
		want   []string // "object field" of each difference
	}{
		{"same outcome", func(*Observed) {}, nil},
		{"the other tied volume is fine", func(o *Observed) {
			o.Claims["tie"] = bound("v2", "p3")
			o.PVs["p2"], o.PVs["p3"] = avail, boundPV("tie", "v2")
		}, nil},
		{"undetermined claims are not compared", func(o *Observed) {
			o.Claims["free"] = pending
			o.PVs["p4"] = avail
		}, nil},
		{"phase differs", func(o *Observed) {
			o.Claims["none"] = bound("v4", "p4")
			o.Claims["free"] = pending
			o.PVs["p4"] = boundPV("none", "v4")
		}, []string{"claim diff-t/none phase"}},
		{"volume differs where determined", func(o *Observed) {
			o.Claims["fixed"] = bound("v1", "p3")
			o.PVs["p1"], o.PVs["p3"] = avail, boundPV("fixed", "v1")
		}, []string{"claim diff-t/fixed volume", "pv p1 phase"}},
		{"volume outside the tied set", func(o *Observed) {
			o.Claims["tie"] = bound("v2", "p4")
			o.Claims["free"] = bound("v3", "p2")
			o.PVs["p2"], o.PVs["p4"] = boundPV("free", "v3"), boundPV("tie", "v2")
		}, []string{"claim diff-t/tie volume"}},
		{"inconsistent binding", func(o *Observed) {
			o.PVs["p1"] = PVState{Phase: corev1.VolumeBound, ClaimRef: testNS + "/fixed", ClaimUID: "other"}
		}, []string{"claim diff-t/fixed consistency", "pv p1 consistency"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ours := Observed{Claims: map[string]ClaimState{}, PVs: map[string]PVState{}}
			for k, v := range kcm.Claims {
				ours.Claims[k] = v
			}
			for k, v := range kcm.PVs {
				ours.PVs[k] = v
			}
			tt.change(&ours)
			diffs, compared := Compare(s, a, kcm, ours)
			if compared != 3 {
				t.Errorf("compared %d claims, want 3", compared)
			}
			var got []string
			for _, d := range diffs {
				got = append(got, d.Object+" "+d.Field)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("differences %q, want %q", got, tt.want)
				for _, d := range diffs {
					t.Log(d)
				}
			}
		})
	}
	if notes := ModelNotes(s, a, kcm); len(notes) != 0 {
		t.Errorf("KCM agrees with the analysis, but notes: %q", notes)
	}
}

func TestSignatureIsOrderFree(t *testing.T) {
	a := Observed{
		Claims: map[string]ClaimState{"x": {Phase: corev1.ClaimBound, Volume: "p"}, "y": {Phase: corev1.ClaimPending}},
		PVs:    map[string]PVState{"p": {Phase: corev1.VolumeBound}},
	}
	b := Observed{
		Claims: map[string]ClaimState{"y": {Phase: corev1.ClaimPending}, "x": {Phase: corev1.ClaimBound, Volume: "p"}},
		PVs:    map[string]PVState{"p": {Phase: corev1.VolumeBound}},
	}
	if a.Signature() != b.Signature() {
		t.Error("signature depends on map order")
	}
	b.Claims["y"] = ClaimState{Phase: corev1.ClaimBound, Volume: "p"}
	if a.Signature() == b.Signature() {
		t.Error("signature misses a change")
	}
}

func TestReplay(t *testing.T) {
	// c0 ties between a and b. c1 selects gold volumes, which only a is,
	// and is pre-bound to mine (two modes): KCM takes the one-mode volume a
	// first when it is free, else mine.
	gold := map[string]string{"tier": "gold"}
	s := &Scenario{Seed: 3, Namespace: testNS,
		PVs: []*corev1.PersistentVolume{
			tpv("a", "", "1Gi", pvLabels(gold)), tpv("b", "", "1Gi"),
			tpv("mine", "", "1Gi", prebind("c1"), pvModesOpt(rwo, rox)),
		},
		Claims: []*corev1.PersistentVolumeClaim{
			tclaim("c0", str(""), "1Gi"), tclaim("c1", str(""), "1Gi", selectLabels(gold)),
		},
	}
	obs := func(c0, c1 string) Observed {
		o := Observed{Claims: map[string]ClaimState{}, PVs: map[string]PVState{}}
		for name, pv := range map[string]string{"c0": c0, "c1": c1} {
			if pv == "" {
				o.Claims[name] = ClaimState{Phase: corev1.ClaimPending}
				continue
			}
			o.Claims[name] = ClaimState{Phase: corev1.ClaimBound, Volume: pv, UID: name}
			o.PVs[pv] = PVState{Phase: corev1.VolumeBound, ClaimRef: testNS + "/" + name, ClaimUID: name}
		}
		return o
	}
	tests := []struct {
		c0, c1 string
		want   []string
	}{
		{"a", "mine", nil},
		{"b", "a", nil},
		{"b", "mine", []string{"claim diff-t/c1"}},
		{"mine", "b", []string{"claim diff-t/c0", "claim diff-t/c1"}},
		{"a", "", []string{"claim diff-t/c1"}},
	}
	for _, tt := range tests {
		var got []string
		for _, is := range replay(s, obs(tt.c0, tt.c1)) {
			got = append(got, is.object)
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("c0=%q c1=%q: wrong decisions %q, want %q", tt.c0, tt.c1, got, tt.want)
		}
	}
	// Per claim, c1 -> mine is a possible outcome, so only the replay sees
	// it; a is Bound whichever volume c0 takes.
	diffs, _ := Compare(s, Analyze(s), obs("a", "mine"), obs("b", "mine"))
	var got []string
	for _, d := range diffs {
		got = append(got, d.Object+" "+d.Field)
	}
	if want := "claim diff-t/c1 decision|pv a phase"; strings.Join(got, "|") != want {
		t.Errorf("differences %q, want %q", got, want)
	}
}
