package explain

import (
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// The binders' Leases. tether's binder elects on a Lease named
// BinderLeaseName in its own namespace (its --leader-elect-resource-name and
// --leader-elect-resource-namespace); kube-controller-manager on
// kube-system/kube-controller-manager.
const (
	BinderLeaseName = "tether-binder"
	KCMLeaseNS      = "kube-system"
	KCMLeaseName    = "kube-controller-manager"
)

// Who runs the binder (BinderStatus.Running).
const (
	BinderTether  = "tether"
	BinderKCM     = "kube-controller-manager"
	BinderNone    = "none"
	BinderUnknown = "unknown"
)

// BinderLeases is what was read of the binders' Leases.
type BinderLeases struct {
	// Name is the tether binder Lease looked for: a name (in any
	// namespace) or namespace/name.
	Name string
	// Tether are the Leases found under that name; TetherRead is false when
	// they could not be read.
	Tether     []*coordinationv1.Lease
	TetherRead bool
	// KCM is kube-controller-manager's Lease, nil when it does not exist;
	// KCMRead is false when it could not be read.
	KCM     *coordinationv1.Lease
	KCMRead bool
}

// BinderStatus says which binder runs, from the Leases. Both binders record
// their events as persistentvolume-controller, so the Leases are what tells
// them apart.
type BinderStatus struct {
	// Running is "tether", "kube-controller-manager", "none" or "unknown".
	Running string `json:"running"`
	// Evidence is what Running rests on.
	Evidence string `json:"evidence"`
	// Leases are the binders' Leases that were found.
	Leases []Lease `json:"leases,omitempty"`
	// Note qualifies the verdicts: with kube-controller-manager's binder,
	// what this tool says the binder does is tether's reading of KCM's
	// rules.
	Note string `json:"note,omitempty"`
}

// WhichBinder says which binder runs: tether's when its Lease is held;
// kube-controller-manager's when KCM leads and tether's Lease is absent or
// stale; none when the Leases exist and none is held; unknown when no Lease
// exists (a binder without leader election leaves none) or they could not be
// read.
func WhichBinder(b BinderLeases, now time.Time) BinderStatus {
	var s BinderStatus
	var tether []Lease
	for _, l := range b.Tether {
		tether = append(tether, leaseOf(l, "", now))
	}
	var kcm *Lease
	if b.KCM != nil {
		k := leaseOf(b.KCM, "", now)
		kcm = &k
		s.Leases = append(s.Leases, k)
	}
	s.Leases = append(tether, s.Leases...)
	tetherText := tetherLeaseText(b, tether, now)
	kcmText := kcmLeaseText(b, kcm, now)
	for _, l := range tether {
		if !l.Held {
			continue
		}
		s.Running = BinderTether
		s.Evidence = fmt.Sprintf("Lease %s/%s is held by %s%s", l.Namespace, l.Name, l.Holder, renewedText(l, now))
		if kcm != nil && kcm.Held {
			s.Note = "kube-controller-manager leads too: its binder must be off (--controllers=*,bootstrapsigner,tokencleaner,-persistentvolume-binder-controller), or both binders act on claims"
		}
		return s
	}
	switch {
	case kcm != nil && kcm.Held && b.TetherRead:
		s.Running = BinderKCM
		s.Evidence = kcmText + ", and " + tetherText
		s.Note = kcmNote
	case kcm != nil && kcm.Held:
		s.Running = BinderUnknown
		s.Evidence = kcmText + ", but " + tetherText + ": kube-controller-manager's binder runs unless tether's does"
	case !b.TetherRead || !b.KCMRead:
		s.Running = BinderUnknown
		s.Evidence = tetherText + "; " + kcmText
	case len(tether) > 0 || kcm != nil:
		s.Running = BinderNone
		s.Evidence = "no binder leads: " + tetherText + "; " + kcmText
	default:
		s.Running = BinderUnknown
		s.Evidence = "neither binder's Lease exists (" + tetherText + "; " + kcmText + "): a binder without leader election leaves none"
	}
	return s
}

const kcmNote = "kube-controller-manager's binder (persistentvolume-binder-controller) runs: what this says the binder does is tether's reading of KCM's rules, and KCM differs where docs/differences.md says"

func tetherLeaseText(b BinderLeases, tether []Lease, now time.Time) string {
	switch {
	case !b.TetherRead:
		return "tether's binder Lease " + b.Name + " could not be read"
	case len(tether) == 0:
		return "tether's binder Lease " + b.Name + " does not exist"
	}
	var parts []string
	for _, l := range tether {
		parts = append(parts, fmt.Sprintf("%s/%s is stale (holder %q%s)", l.Namespace, l.Name, l.Holder, renewedText(l, now)))
	}
	return "tether's binder Lease " + strings.Join(parts, ", ")
}

func kcmLeaseText(b BinderLeases, kcm *Lease, now time.Time) string {
	name := KCMLeaseNS + "/" + KCMLeaseName
	switch {
	case !b.KCMRead:
		return "kube-controller-manager's Lease " + name + " could not be read"
	case kcm == nil:
		return "kube-controller-manager's Lease " + name + " does not exist"
	case kcm.Held:
		return fmt.Sprintf("Lease %s is held by %s%s", name, kcm.Holder, renewedText(*kcm, now))
	}
	return fmt.Sprintf("kube-controller-manager's Lease %s is stale (holder %q%s)", name, kcm.Holder, renewedText(*kcm, now))
}

func renewedText(l Lease, now time.Time) string {
	if l.Renewed == nil {
		return ""
	}
	return ", renewed " + ago(now, *l.Renewed)
}

// leaseOf is a Lease as the explanation shows it; held when its holder
// renewed it within its duration.
func leaseOf(l *coordinationv1.Lease, node string, now time.Time) Lease {
	out := Lease{Namespace: l.Namespace, Name: l.Name, Node: node}
	if h := l.Spec.HolderIdentity; h != nil {
		out.Holder = *h
	}
	if r := l.Spec.RenewTime; r != nil {
		t := r.Time
		out.Renewed = &t
		if out.Holder != "" && l.Spec.LeaseDurationSeconds != nil {
			out.Held = now.Before(t.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
		}
	}
	return out
}

// checkBinder is the advice to look at the binder, for the binder that runs.
func (w *world) checkBinder() string {
	s := w.binders
	if s != nil {
		holder := ""
		for _, l := range s.Leases {
			if l.Held && holder == "" {
				holder = l.Holder
			}
		}
		switch s.Running {
		case BinderTether:
			return fmt.Sprintf("read the log of tether's binder (%s) about this claim", holder)
		case BinderKCM:
			return fmt.Sprintf("read the log of kube-controller-manager (%s) about this claim", holder)
		case BinderNone:
			return "start a binder: none leads"
		}
	}
	return "check that a binder runs and leads (tether's, or kube-controller-manager's persistentvolume-binder-controller)"
}

// needsBinder are the causes that wait for the binder to act.
var needsBinder = map[string]bool{CauseBinderNotActed: true, CauseNotAnnotated: true}

// noBinder turns a cause that waits for the binder into NoBinder when no
// binder leads.
func (w *world) noBinder(c *Cause) *Cause {
	if c == nil || w.binders == nil || w.binders.Running != BinderNone || !needsBinder[c.Reason] {
		return c
	}
	return &Cause{Reason: CauseNoBinder, Message: w.binders.Evidence + "; meanwhile " + c.Message,
		Action: "start tether's binder (deploy/csi), or kube-controller-manager with its persistentvolume-binder-controller: the leader acts on the claim at its first sync"}
}
