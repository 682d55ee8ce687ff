package explain

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

func binderLease(ns, holder string, renewedAgo time.Duration) *coordinationv1.Lease {
	l := lease(BinderLeaseName, holder, renewedAgo)
	l.Namespace = ns
	return l
}

func kcmLease(holder string, renewedAgo time.Duration) *coordinationv1.Lease {
	return lease(KCMLeaseName, holder, renewedAgo)
}

func TestWhichBinder(t *testing.T) {
	read := func(tether []*coordinationv1.Lease, kcm *coordinationv1.Lease) BinderLeases {
		return BinderLeases{Name: BinderLeaseName, Tether: tether, TetherRead: true, KCM: kcm, KCMRead: true}
	}
	tests := []struct {
		name    string
		in      BinderLeases
		running string
		words   []string // fragments of the evidence and note
		note    bool
	}{
		{name: "tether's Lease held", in: read([]*coordinationv1.Lease{binderLease("tether-system", "b-0", time.Second)}, nil),
			running: BinderTether, words: []string{"Lease tether-system/tether-binder is held by b-0, renewed 1s ago"}},
		{name: "tether's held, KCM leads too", in: read([]*coordinationv1.Lease{binderLease("tether-system", "b-0", time.Second)}, kcmLease("kcm-1", 0)),
			running: BinderTether, note: true, words: []string{"-persistentvolume-binder-controller"}},
		{name: "KCM leads, tether's absent", in: read(nil, kcmLease("kcm-1", 2*time.Second)),
			running: BinderKCM, note: true, words: []string{"Lease kube-system/kube-controller-manager is held by kcm-1", "tether-binder does not exist",
				"tether's reading of KCM's rules"}},
		{name: "KCM leads, tether's stale", in: read([]*coordinationv1.Lease{binderLease("tether-system", "b-0", time.Hour)}, kcmLease("kcm-1", 0)),
			running: BinderKCM, note: true, words: []string{`tether-system/tether-binder is stale (holder "b-0", renewed 1h0m0s ago)`}},
		{name: "both stale", in: read([]*coordinationv1.Lease{binderLease("tether-system", "b-0", time.Hour)}, kcmLease("kcm-1", time.Hour)),
			running: BinderNone, words: []string{"no binder leads", "kube-controller-manager's Lease kube-system/kube-controller-manager is stale"}},
		{name: "tether's stale, no KCM", in: read([]*coordinationv1.Lease{binderLease("tether-system", "", time.Minute)}, nil),
			running: BinderNone, words: []string{"no binder leads", "kube-controller-manager does not exist"}},
		{name: "no Lease at all", in: read(nil, nil), running: BinderUnknown,
			words: []string{"neither binder's Lease exists", "a binder without leader election leaves none"}},
		{name: "unreadable", in: BinderLeases{Name: BinderLeaseName}, running: BinderUnknown,
			words: []string{"tether-binder could not be read", "kube-system/kube-controller-manager could not be read"}},
		{name: "KCM leads, tether's unreadable", in: BinderLeases{Name: "tether-system/tether-binder", KCM: kcmLease("kcm-1", 0), KCMRead: true},
			running: BinderUnknown, words: []string{"unless tether's does", "tether-system/tether-binder could not be read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := WhichBinder(tt.in, now)
			if s.Running != tt.running || (s.Note != "") != tt.note {
				t.Errorf("running %q (note %q), want %q (note %v)", s.Running, s.Note, tt.running, tt.note)
			}
			for _, w := range tt.words {
				if !strings.Contains(s.Evidence+" | "+s.Note, w) {
					t.Errorf("%q not in %q | %q", w, s.Evidence, s.Note)
				}
			}
		})
	}
}

// TestBinderInCauses: the causes that wait for the binder name the one
// that runs, become NoBinder when none leads, and with KCM's binder the
// explanation says it is tether's reading of KCM's rules.
func TestBinderInCauses(t *testing.T) {
	manual := class("manual", "kubernetes.io/no-provisioner", false, false)
	dynamic := class("fast", driver, false, false)
	match := Input{Claim: newClaim("c", "manual", "1Gi"), Classes: []*storagev1.StorageClass{manual},
		Volumes: []*v1.PersistentVolume{newPV("pv-1", "manual", "1Gi")}}
	notHanded := Input{Claim: newClaim("c", "fast", "1Gi"), Classes: []*storagev1.StorageClass{dynamic}}
	tooSmall := Input{Claim: newClaim("c", "manual", "5Gi"), Classes: []*storagev1.StorageClass{manual},
		Volumes: []*v1.PersistentVolume{newPV("pv-1", "manual", "1Gi")}}
	tether := &BinderLeases{Name: BinderLeaseName, TetherRead: true, KCMRead: true,
		Tether: []*coordinationv1.Lease{binderLease("tether-system", "b-0", time.Second)}}
	kcm := &BinderLeases{Name: BinderLeaseName, TetherRead: true, KCMRead: true, KCM: kcmLease("kcm-1", time.Second)}
	none := &BinderLeases{Name: BinderLeaseName, TetherRead: true, KCMRead: true,
		Tether: []*coordinationv1.Lease{binderLease("tether-system", "b-0", time.Hour)}}
	tests := []struct {
		name    string
		in      Input
		binders *BinderLeases
		want    string
		words   []string
	}{
		{name: "a match, tether's binder", in: match, binders: tether, want: CauseBinderNotActed, words: []string{"read the log of tether's binder (b-0)"}},
		{name: "a match, KCM's binder", in: match, binders: kcm, want: CauseBinderNotActed, words: []string{"read the log of kube-controller-manager (kcm-1)"}},
		{name: "a match, no binder", in: match, binders: none, want: CauseNoBinder,
			words: []string{"no binder leads", "meanwhile volume pv-1 matches", "start tether's binder"}},
		{name: "not handed, no binder", in: notHanded, binders: none, want: CauseNoBinder, words: []string{"not yet handed to provisioner"}},
		{name: "not handed, binder unknown", in: notHanded, want: CauseNotAnnotated, words: []string{"check that a binder runs and leads"}},
		{name: "too small, no binder: the volumes are the cause", in: tooSmall, binders: none, want: "TooSmall"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now, tt.in.Binders = now, tt.binders
			e := Explain(tt.in)
			if e.Cause == nil || e.Cause.Reason != tt.want {
				t.Fatalf("cause %+v, want %s", e.Cause, tt.want)
			}
			for _, w := range tt.words {
				if !strings.Contains(e.Cause.Message+" | "+e.Cause.Action, w) {
					t.Errorf("%q not in %+v", w, e.Cause)
				}
			}
			if (tt.binders != nil) != (e.BinderRunning != nil) {
				t.Errorf("binder status %+v", e.BinderRunning)
			}
		})
	}
	e := Explain(Input{Now: now, Claim: match.Claim, Classes: match.Classes, Volumes: match.Volumes, Binders: kcm})
	if e.BinderRunning.Running != BinderKCM || !strings.Contains(e.BinderRunning.Note, "tether's reading of KCM's rules") {
		t.Errorf("with KCM's binder: %+v", e.BinderRunning)
	}
}
