package explain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/binder"
)

// candidates fills the volumes of the claim's class (and those pre-bound to
// it), each with the binder's first reason to pass it over, the others'
// count by class, and the best matches.
func (w *world) candidates(e *Explanation) {
	if !w.volumesKnown {
		return
	}
	q := w.query()
	// Before a node is selected, a delayed class takes only a pre-bound
	// volume; the reason shown for the others is what they would meet
	// once a node is (node affinity aside).
	waiting := q.DelayBinding && q.NodeLabels == nil
	relaxed := q
	relaxed.DelayBinding = false
	for _, pv := range w.in.Volumes {
		c := storagehelpers.GetPersistentVolumeClass(pv)
		if c != w.needs.Class && !binder.PreBoundTo(pv, w.needs) {
			if e.VolumesOfOtherClasses == nil {
				e.VolumesOfOtherClasses = map[string]int{}
			}
			e.VolumesOfOtherClasses[c]++
			continue
		}
		cand := Candidate{Volume: pv.Name, Capacity: quantity(pv.Spec.Capacity), Match: true}
		m := binder.Reject(pv, q)
		if waiting && m != nil && m.Reason == binder.MismatchNoNode {
			if r := binder.Reject(pv, relaxed); r != nil {
				m = r
			}
		}
		if m != nil {
			cand.Match, cand.Reason, cand.Message = false, string(m.Reason), m.Message
		}
		e.Candidates = append(e.Candidates, cand)
	}
	slices.SortFunc(e.Candidates, func(a, b Candidate) int { return cmp.Compare(a.Volume, b.Volume) })
	e.ReasonCounts = countReasons(e.Candidates)
	e.BestCandidates = bestCandidates(e.Candidates)
	if best := w.bestMatch(q); best != nil {
		e.BestMatch = best.Name
	} else if waiting {
		if best := w.bestMatch(relaxed); best != nil {
			e.BestMatchOnceScheduled = best.Name
		}
	}
}

// namedVolume explains a claim that names its volume in spec.volumeName.
func (w *world) namedVolume() ([]Candidate, *Cause) {
	name := w.claim.Spec.VolumeName
	pv := w.volume(name)
	if pv == nil {
		if !w.volumesKnown {
			return nil, &Cause{Reason: CauseUnknown, Message: fmt.Sprintf("the claim names volume %q, which could not be read", name)}
		}
		return nil, &Cause{Reason: CauseVolumeNameMissing, Message: fmt.Sprintf("the claim names volume %q, which does not exist", name),
			Action: fmt.Sprintf("create PV %q (the binder binds it once it exists), or re-create the claim without spec.volumeName", name)}
	}
	cand := []Candidate{{Volume: pv.Name, Capacity: quantity(pv.Spec.Capacity), Match: true}}
	switch {
	case pv.Spec.ClaimRef != nil && !binder.PreBoundTo(pv, w.needs):
		ref := pv.Spec.ClaimRef
		cand[0].Match, cand[0].Reason = false, string(binder.MismatchClaimed)
		cand[0].Message = fmt.Sprintf("the volume is claimed by %s/%s", ref.Namespace, ref.Name)
		return cand, &Cause{Reason: CauseVolumeNameTaken, Message: fmt.Sprintf("volume %q is already bound to %s/%s", name, ref.Namespace, ref.Name),
			Action: "name a free volume, or free this one (delete the other claim; a Retain volume then needs its claimRef removed)"}
	case pv.Spec.ClaimRef == nil:
		if err := binder.Satisfies(pv, w.needs); err != nil {
			cand[0].Match, cand[0].Message = false, err.Error()
			if m, ok := err.(*binder.Mismatch); ok {
				cand[0].Reason = string(m.Reason)
			}
			return cand, &Cause{Reason: CauseVolumeNameMismatch, Message: fmt.Sprintf("the claim names volume %q, which does not satisfy it: %v", name, err),
				Action: "change the volume or re-create the claim so that they agree"}
		}
	}
	return cand, &Cause{Reason: CauseBinderNotActed, Message: fmt.Sprintf("volume %q satisfies the claim and the binder would bind it now", name),
		Action: "wait for the binder's next sync; if the claim stays Pending, " + w.checkBinder()}
}

// staticCause explains a claim that only a static volume can serve.
func (w *world) staticCause(cands []Candidate, onceScheduled string) *Cause {
	c := w.needs
	switch {
	case c.Class == "" && binder.DefaultClass(w.in.Classes) == "" && !w.volumesKnown:
		return &Cause{Reason: CauseUnknown, Message: "the claim has no class and persistentvolumes could not be read"}
	case c.Class != "" && w.class == nil && w.classKnown:
		return &Cause{Reason: CauseClassNotFound, Message: fmt.Sprintf("StorageClass %q does not exist", c.Class),
			Action: fmt.Sprintf("create StorageClass %q, or re-create the claim with a class that exists", c.Class)}
	case !w.volumesKnown:
		return &Cause{Reason: CauseUnknown, Message: "persistentvolumes could not be read, so the volumes that could serve the claim are unknown",
			Action: "ask someone who can read PersistentVolumes to run this again"}
	}
	if binder.DelayBinding(w.class) && !w.hasSelectedNode() {
		if cause := w.consumerCause(onceScheduled); cause != nil {
			return cause
		}
	}
	if len(cands) == 0 {
		cause := &Cause{Reason: CauseNoVolumeOfClass, Message: fmt.Sprintf("no PersistentVolume has class %q", c.Class),
			Action: fmt.Sprintf("create a PV of class %q with at least %s, access modes %s, volumeMode %s", c.Class, c.Request.String(),
				strings.Join(modes(c.AccessModes), ","), c.Mode)}
		if c.Class == "" {
			cause.Reason = CauseNoClass
			cause.Message = "the claim has no storage class, there is no default class, and no PersistentVolume without a class exists"
			cause.Action += ", or give the claim a class that provisions"
		}
		return cause
	}
	// The reason most of the volumes not claimed by another share, the
	// nearer miss on a tie; ClaimedByAnother only when every one is.
	counts := countReasons(cands)
	reason, n := binder.MismatchClaimed, 0
	for _, rc := range counts {
		if rc.Reason != string(binder.MismatchClaimed) && rc.Reason != ReasonMatch {
			reason, n = binder.MismatchReason(rc.Reason), rc.Count
			break
		}
	}
	if n == 0 {
		n = len(cands)
	}
	msg := w.staticMessage(reason, cands, n)
	if n < len(cands) {
		msg += fmt.Sprintf("; all %d: %s", len(cands), CountsText(counts))
	}
	return &Cause{Reason: string(reason), Message: msg, Action: w.staticAction(reason, cands)}
}

func (w *world) hasSelectedNode() bool {
	_, ok := w.claim.Annotations[storagehelpers.AnnSelectedNode]
	return ok
}

func (w *world) staticMessage(r binder.MismatchReason, cands []Candidate, n int) string {
	var of []Candidate
	for _, cd := range cands {
		if cd.Reason == string(r) {
			of = append(of, cd)
		}
	}
	nearest := of
	if best := bestCandidates(of); len(best) > 0 {
		nearest = best
	}
	if len(cands) == 1 {
		return fmt.Sprintf("no volume of class %q fits: its only one, %s, is passed over for %s: %s", w.needs.Class, cands[0].Volume, r, cands[0].Message)
	}
	msg := fmt.Sprintf("no volume of class %q fits: %d of its %d are passed over for %s", w.needs.Class, n, len(cands), r)
	if n == len(cands) {
		msg = fmt.Sprintf("no volume of class %q fits: all %d are passed over for %s", w.needs.Class, n, r)
	}
	if len(nearest) > 0 {
		msg += fmt.Sprintf(", the nearest %s: %s", nearest[0].Volume, nearest[0].Message)
	}
	return msg
}

func (w *world) staticAction(r binder.MismatchReason, cands []Candidate) string {
	c := w.needs
	class := fmt.Sprintf("%q", c.Class)
	switch r {
	case binder.MismatchSize:
		var largest resource.Quantity
		var name string
		for _, cd := range cands {
			if cd.Reason != string(binder.MismatchSize) {
				continue
			}
			if q, err := resource.ParseQuantity(cd.Capacity); err == nil && q.Cmp(largest) > 0 {
				largest, name = q, cd.Volume
			}
		}
		return fmt.Sprintf("create a PV of class %s of at least %s, or ask for at most %s (%s, the largest that is otherwise free)",
			class, c.Request.String(), largest.String(), name)
	case binder.MismatchAccessModes:
		return fmt.Sprintf("create a PV of class %s with access modes %s, or ask for modes the volumes have", class, strings.Join(modes(c.AccessModes), ","))
	case binder.MismatchSelector:
		return fmt.Sprintf("fix the claim's selector (%s), or label a PV of class %s to match it", c.Selector.String(), class)
	case binder.MismatchVolumeMode:
		return fmt.Sprintf("create a PV of class %s with volumeMode %s, or ask for the volumes' mode", class, c.Mode)
	case binder.MismatchVAC:
		return fmt.Sprintf("create a PV of class %s with volumeAttributesClassName %q, or change the claim's", class, c.VAC)
	case binder.MismatchNodeAffinity:
		node := w.claim.Annotations[storagehelpers.AnnSelectedNode]
		return fmt.Sprintf("create a PV of class %s that node %s can reach, or move the pod so that the scheduler picks a node a free PV allows", class, node)
	case binder.MismatchClaimed:
		return fmt.Sprintf("create another PV of class %s: every one is claimed", class)
	case binder.MismatchPhase:
		return fmt.Sprintf("the free-looking PVs of class %s are Released or Failed: reclaim one by hand (clear its claimRef) or create a new PV", class)
	case binder.MismatchDeleting:
		return fmt.Sprintf("create a new PV of class %s: the others are being deleted", class)
	case binder.MismatchNoNode:
		return "wait: kube-scheduler sets volume.kubernetes.io/selected-node on the claim once it places the pod, and the binder then binds; if it stays so, check kube-scheduler"
	}
	return ""
}
