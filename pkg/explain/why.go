package explain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/binder"
	"github.com/tether-csi/tether/pkg/inflight"
)

// FinalizerCloneSource is external-provisioner's (and tether's) finalizer on
// the source claim of a clone in progress.
const FinalizerCloneSource = "provisioner.storage.kubernetes.io/cloning-protection"

// finalizerPVCProtection is kube-controller-manager's claim protection.
const finalizerPVCProtection = "kubernetes.io/pvc-protection"

// Explain says why in.Claim is in its state.
func Explain(in Input) Explanation {
	w, e := explain(in)
	e.Cause = w.noBinder(e.Cause)
	e.AnotherBinder = anotherBinder(in.AnotherBinder)
	if e.NodeLoss == nil {
		e.NodeLoss = w.earlierRelease()
	}
	return e
}

func explain(in Input) (*world, Explanation) {
	c := in.Claim
	needs, needsErr := binder.ParseClaim(c)
	e := Explanation{
		Claim:        c.Namespace + "/" + c.Name,
		Phase:        string(c.Status.Phase),
		StorageClass: needs.Class,
		Request:      needs.Request.String(),
		VolumeMode:   string(needs.Mode),
		Volume:       c.Spec.VolumeName,
		Unreadable:   in.Unreadable,
	}
	if e.Phase == "" {
		e.Phase = string(v1.ClaimPending)
	}
	for _, m := range needs.AccessModes {
		e.AccessModes = append(e.AccessModes, string(m))
	}
	created := c.CreationTimestamp.Time
	e.Since = &created

	w := newWorld(in, needs)
	if in.Binders != nil {
		s := WhichBinder(*in.Binders, in.Now)
		w.binders, e.BinderRunning = &s, &s
	}
	decision := binder.DecideClaim(w.claimInput(needsErr))
	e.Binder = describeDecision(decision)
	if missing := w.binderBlind(); missing != "" {
		e.Binder = "cannot tell: " + missing + " could not be read"
	}
	w.binderText = e.Binder

	if c.DeletionTimestamp != nil {
		e.Phase = "Terminating"
		deleted := c.DeletionTimestamp.Time
		e.Since = &deleted
		e.Finalizers = w.holders()
		e.State = fmt.Sprintf("Terminating since %s, held by %s", ago(in.Now, deleted), finalizerNames(e.Finalizers))
		e.Cause = &Cause{Reason: CauseTerminating, Message: "the claim is being deleted and finalizers hold it: " + holdersText(e.Finalizers),
			Action: terminatingAction(e.Finalizers)}
		if n := w.nodeLossOfClaim(); n != nil && n.ReleasedAt != nil {
			e.NodeLoss, e.Cause = n, w.releasedCause(n)
		}
		return w, e
	}
	if binder.BindCompleted(c) {
		return w, w.explainBound(e, decision)
	}
	e.State = fmt.Sprintf("Pending since %s (created %s)", ago(in.Now, created), created.UTC().Format(time.RFC3339))
	if needsErr != nil {
		e.Cause = &Cause{Reason: CauseInvalidClaim, Message: "no volume can satisfy the claim: " + needsErr.Error(),
			Action: "fix the claim (delete and re-create it: these fields cannot be changed)"}
		return w, e
	}
	if c.Spec.VolumeName != "" {
		e.Candidates, e.Cause = w.namedVolume()
		return w, e
	}
	if decision.Op == binder.ClaimSetClass {
		e.Cause = &Cause{Reason: CauseBinderNotActed,
			Message: fmt.Sprintf("the claim has no class; the binder gives it the default class %q at its next sync", decision.Class),
			Action:  "wait for the binder's next sync; if the claim keeps no class, " + w.checkBinder()}
		return w, e
	}
	w.candidates(&e)
	if e.BestMatch != "" {
		e.Cause = &Cause{Reason: CauseBinderNotActed,
			Message: fmt.Sprintf("volume %s matches and the binder would bind it now; it has not done so yet", e.BestMatch),
			Action:  "wait for the binder's next sync of the claim (its resync period, 15s by default); if the claim stays Pending, " + w.checkBinder()}
		return w, e
	}
	if e.Provisioning = w.provisioning(); e.Provisioning != nil {
		e.Cause = w.dynamicCause(e.Provisioning, e.BestMatchOnceScheduled)
		return w, e
	}
	e.Cause = w.staticCause(e.Candidates, e.BestMatchOnceScheduled)
	return w, e
}

// world is the input with the claim's needs and lookups.
type world struct {
	in    Input
	claim *v1.PersistentVolumeClaim
	needs binder.ClaimNeeds
	class *storagev1.StorageClass
	// classKnown is false when classes could not be read.
	classKnown, volumesKnown bool
	// binderText is what the binder does now, in words.
	binderText string
	// binders says which binder runs, nil when not looked at.
	binders *BinderStatus
}

func newWorld(in Input, needs binder.ClaimNeeds) *world {
	w := &world{in: in, claim: in.Claim, needs: needs, classKnown: !in.unreadable("storageclasses"),
		volumesKnown: !in.unreadable("persistentvolumes")}
	for _, sc := range in.Classes {
		if sc.Name == needs.Class {
			w.class = sc
		}
	}
	return w
}

// binderBlind names what the binder's decision needs and could not be
// read, "" when nothing is missing.
func (w *world) binderBlind() string {
	var missing []string
	if !w.classKnown {
		missing = append(missing, "storageclasses")
	}
	if !w.volumesKnown {
		missing = append(missing, "persistentvolumes")
	}
	if _, ok := w.claim.Annotations[storagehelpers.AnnSelectedNode]; ok && w.in.unreadable("nodes") {
		missing = append(missing, "the selected node")
	}
	return strings.Join(missing, ", ")
}

func (in Input) unreadable(resource string) bool {
	return slices.ContainsFunc(in.Unreadable, func(g Gap) bool { return g.Resource == resource })
}

func (w *world) claimInput(needsErr error) binder.ClaimInput {
	ci := binder.ClaimInput{Claim: w.claim, Needs: w.needs, NeedsErr: needsErr, Class: w.class,
		DefaultClass: binder.DefaultClass(w.in.Classes), Waited: w.in.Now.Sub(w.claim.CreationTimestamp.Time)}
	if name := w.claim.Spec.VolumeName; name != "" {
		ci.Volume = w.volume(name)
	} else if needsErr == nil && !binder.BindCompleted(w.claim) {
		ci.Match = w.bestMatch(w.query())
	}
	return ci
}

func (w *world) volume(name string) *v1.PersistentVolume {
	for _, pv := range w.in.Volumes {
		if pv.Name == name {
			return pv
		}
	}
	return nil
}

// query is the binder's search for the claim (as its sync builds it).
func (w *world) query() binder.MatchQuery {
	q := binder.MatchQuery{Needs: w.needs, DelayBinding: binder.DelayBinding(w.class)}
	if q.DelayBinding {
		if _, ok := w.claim.Annotations[storagehelpers.AnnSelectedNode]; ok {
			q.NodeLabels = map[string]string{} // a node that does not exist
			if n := w.in.SelectedNode; n != nil && n.Labels != nil {
				q.NodeLabels = n.Labels
			}
		}
	}
	return q
}

// bestMatch is the binder's choice: its own index and search.
func (w *world) bestMatch(q binder.MatchQuery) *v1.PersistentVolume {
	ix := binder.NewIndex()
	for _, pv := range w.in.Volumes {
		ix.Upsert(pv)
	}
	return ix.Reserve(q)
}

func describeDecision(d binder.ClaimDecision) string {
	var s string
	switch d.Op {
	case binder.ClaimBind:
		s = "binds the claim to volume " + d.Volume.Name
	case binder.ClaimLost:
		s = "marks the claim Lost"
	case binder.ClaimProvision:
		s = fmt.Sprintf("hands the claim to provisioner %q (storage-provisioner annotations) and keeps it Pending", d.Provisioner)
	case binder.ClaimSetClass:
		s = fmt.Sprintf("gives the claim the default class %q", d.Class)
	default:
		s = "keeps the claim Pending"
	}
	if d.Event != nil {
		s += fmt.Sprintf(" (event %s: %s)", d.Event.Reason, d.Event.Message)
	}
	return s
}

func (w *world) explainBound(e Explanation, d binder.ClaimDecision) Explanation {
	c, now := w.claim, w.in.Now
	pv := w.volume(c.Spec.VolumeName)
	switch {
	// With the volume unreadable the binder's Lost is no verdict: a
	// namespace user cannot read any volume.
	case c.Status.Phase == v1.ClaimLost || (d.Op == binder.ClaimLost && w.volumesKnown):
		e.Phase = string(v1.ClaimLost)
		msg := "the claim has lost its volume"
		if d.Event != nil {
			msg = d.Event.Message
		} else if c.Spec.VolumeName != "" && pv == nil && !w.volumesKnown {
			msg = fmt.Sprintf("the claim is Lost; volume %s could not be read", c.Spec.VolumeName)
		}
		e.State = "Lost: " + msg
		e.Cause = &Cause{Reason: CauseLost, Message: msg,
			Action: fmt.Sprintf("restore PV %q with a claimRef to this claim (UID %s), or delete the claim; data on the volume may be lost", c.Spec.VolumeName, c.UID)}
	case c.Status.Phase == v1.ClaimBound:
		e.State = "Bound to " + c.Spec.VolumeName
		if pv != nil {
			e.State += fmt.Sprintf(" (%s, %s)", quantity(pv.Spec.Capacity), strings.Join(modes(pv.Spec.AccessModes), ","))
		}
		if t := boundAt(c); t != nil {
			e.State += ", since " + ago(now, *t)
		}
		if n := w.nodeLossOfClaim(); n != nil {
			e.NodeLoss, e.Cause = n, w.nodeLostCause(n)
		}
	default:
		e.State = fmt.Sprintf("binding to %s in progress (bind-completed is set, phase %s)", c.Spec.VolumeName, e.Phase)
		e.Cause = &Cause{Reason: CauseBinderNotActed, Message: "the binder has started binding and not finished: " + e.Binder,
			Action: "wait for the binder's next sync; if it stays so, " + w.checkBinder()}
	}
	return e
}

// boundAt is the last transition time the claim's conditions show, if any.
func boundAt(c *v1.PersistentVolumeClaim) *time.Time {
	var t *time.Time
	for _, cond := range c.Status.Conditions {
		if lt := cond.LastTransitionTime.Time; !lt.IsZero() && (t == nil || lt.After(*t)) {
			t = &lt
		}
	}
	return t
}

func (w *world) holders() []Holder {
	var out []Holder
	for _, f := range w.claim.Finalizers {
		h := Holder{Finalizer: f}
		switch f {
		case finalizerPVCProtection:
			if pods := w.podsUsing(); len(pods) > 0 {
				var names []string
				for _, p := range pods {
					names = append(names, p.Name)
				}
				h.Why = "pods use the claim: " + strings.Join(names, ", ")
			} else if w.in.unreadable("pods") {
				h.Why = "kube-controller-manager keeps it while a pod uses the claim (pods could not be read)"
			} else {
				h.Why = "no pod uses the claim: kube-controller-manager's pvc-protection controller should remove it soon"
			}
		case inflight.Finalizer:
			driver, name, _ := inflight.Volume(w.claim)
			h.Why = fmt.Sprintf("tether's provisioner for %q may still be creating volume %q; it removes the record once that volume is deleted or its PV saved", driver, name)
			if inflight.Unread(w.claim) {
				h.Why = fmt.Sprintf("tether's in-flight record for %q, of format %q, which this kubectl-tether does not read (it reads 1 to %d): a provisioner that reads it settles it, one that does not leaves it; see docs/upgrade.md",
					driver, w.claim.Annotations[inflight.AnnFormat], inflight.FormatRead)
			}
		case FinalizerCloneSource:
			h.Why = "a clone of this claim is being created; the provisioner removes it once no clone is in progress"
		default:
			h.Why = "not a finalizer tether knows; whoever added it must remove it"
		}
		out = append(out, h)
	}
	return out
}

func finalizerNames(hs []Holder) string {
	if len(hs) == 0 {
		return "nothing (it should go at once)"
	}
	var s []string
	for _, h := range hs {
		s = append(s, h.Finalizer)
	}
	return strings.Join(s, ", ")
}

func holdersText(hs []Holder) string {
	var s []string
	for _, h := range hs {
		s = append(s, h.Finalizer+": "+h.Why)
	}
	return strings.Join(s, "; ")
}

func terminatingAction(hs []Holder) string {
	for _, h := range hs {
		if h.Finalizer == finalizerPVCProtection && strings.HasPrefix(h.Why, "pods use") {
			return "delete the pods that use the claim"
		}
	}
	for _, h := range hs {
		if h.Finalizer == inflight.Finalizer {
			return "keep the provisioner for its driver running: it finishes or deletes the volume, then lets the claim go"
		}
	}
	return ""
}

func ago(now, t time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}

func quantity(rl v1.ResourceList) string {
	q, ok := rl[v1.ResourceStorage]
	if !ok {
		return "no capacity"
	}
	return q.String()
}

func modes(ms []v1.PersistentVolumeAccessMode) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, string(m))
	}
	return out
}
