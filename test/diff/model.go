package diff

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The analysis decides, for each claim of a scenario, which parts of its
// outcome are determined, so that the two binders can be held to agree on
// them, and which depend on a free choice (a tie) that each binder may make
// its own way.
//
// It replays the claims in creation order, the order in which both binders
// see them: the harness creates them one by one after every volume is
// Available, and KCM's binder handles claims with one worker in the order its
// informer delivers them. For each claim it computes the set of equally good
// volumes under KCM's rules:
//
//   - a claim that names a volume (spec.volumeName) gets it if the volume is
//     free and fits (size, class, volume mode, access modes; no selector), or
//     if the volume is pre-bound to the claim (then without any check);
//   - otherwise the candidate volumes are grouped by their set of access
//     modes (only sets that hold every mode the claim asks for); groups with
//     fewer modes come first, and groups with as many modes come in no fixed
//     order. The first group with a match decides. In a group, a volume
//     pre-bound to the claim wins (class, selector and phase unchecked);
//     else the smallest free volume that fits wins, and volumes of equal
//     size tie in no fixed order.
//
// When a claim has several equally good volumes, every choice is followed:
// the analysis keeps the set of possible states (which volumes are taken)
// after each claim. A claim's phase is determined when it is the same in
// every state, its volume when that is too; otherwise the claim's possible
// volumes are its candidates, and a binder must pick one of them.
//
// KCM's behaviour here was read from its source, not copied; where the
// analysis and KCM disagree the harness reports it as a note, not as a
// difference between the binders.

// ClaimExpectation is what the analysis knows of one claim's outcome.
type ClaimExpectation struct {
	Name string
	// PhaseKnown means the claim's final phase is determined: Phase.
	PhaseKnown bool
	Phase      corev1.PersistentVolumeClaimPhase
	// VolumeKnown means the claim's final spec.volumeName is determined:
	// Volume. That is the volume it binds to, or for a claim that stays
	// Pending the volume it asked for, if any.
	VolumeKnown bool
	Volume      string
	// Candidates are the volumes the claim may get when that is not
	// determined (sorted).
	Candidates []string
	// Why explains the expectation, for reports.
	Why string
}

// PVExpectation is what the analysis knows of one volume's final phase.
type PVExpectation struct {
	Name       string
	PhaseKnown bool
	Phase      corev1.PersistentVolumePhase
}

// Analysis is the expectation for a whole scenario, in object order.
type Analysis struct {
	Claims []ClaimExpectation
	PVs    []PVExpectation
}

// maxStates bounds the possible states followed at once; past it the rest
// of the scenario is left undetermined. Generated scenarios stay far below.
const maxStates = 50000

// taken is a set of volumes, by index in Scenario.PVs.
type taken uint64

type modelPV struct {
	pv       *corev1.PersistentVolume
	modes    string // normalized access modes, the group key
	nModes   int
	capacity resource.Quantity
}

type modelClaim struct {
	claim    *corev1.PersistentVolumeClaim
	class    string
	delay    bool
	selector labels.Selector
}

// Analyze computes the expectations of a scenario. It is a pure function.
// Scenarios have at most 64 volumes.
func Analyze(s *Scenario) *Analysis {
	if len(s.PVs) > 64 {
		panic(fmt.Sprintf("diff: Analyze supports 64 volumes, got %d", len(s.PVs)))
	}
	pvs := modelPVs(s)
	a := &Analysis{}
	states := map[taken]bool{0: true}
	for _, claim := range s.Claims {
		if states == nil {
			a.Claims = append(a.Claims, ClaimExpectation{Name: claim.Name, Why: "too many possible states to follow"})
			continue
		}
		mc, why := newModelClaim(s, claim)
		outcomes := map[string]bool{} // volume name, "" for Pending
		whys := map[string]bool{}
		next := map[taken]bool{}
		for st := range states {
			if mc == nil {
				whys[why] = true
				outcomes["?"] = true
				next[st] = true
				continue
			}
			best, why := choose(mc, pvs, st)
			whys[why] = true
			if len(best) == 0 {
				outcomes[""] = true
				next[st] = true
			}
			for _, i := range best {
				outcomes[pvs[i].pv.Name] = true
				next[st|1<<i] = true
			}
		}
		a.Claims = append(a.Claims, expectation(claim, outcomes, whys))
		states = next
		if len(states) > maxStates {
			states = nil
		}
	}
	for i, p := range pvs {
		e := PVExpectation{Name: p.pv.Name}
		phases := map[corev1.PersistentVolumePhase]bool{}
		for st := range states {
			if st&(1<<i) != 0 {
				phases[corev1.VolumeBound] = true
			} else {
				// Unbound, or pre-bound (claimRef without UID) to a
				// claim that did not take it: both are Available.
				phases[corev1.VolumeAvailable] = true
			}
		}
		if len(phases) == 1 {
			for phase := range phases {
				e.PhaseKnown, e.Phase = true, phase
			}
		}
		a.PVs = append(a.PVs, e)
	}
	return a
}

// replay checks one binder's decisions one by one: claims in creation
// order, each against KCM's rules applied to the volumes that this binder had
// itself given to earlier claims. Compare sees a wrong choice only through
// the outcomes it changes, maybe on a later claim; replay names the claim
// whose decision was wrong. Pure.
func replay(s *Scenario, o Observed) []issue {
	if len(s.PVs) > 64 {
		return nil
	}
	pvs := modelPVs(s)
	index := map[string]int{}
	for i, pv := range s.PVs {
		index[pv.Name] = i
	}
	var issues []issue
	var st taken
	for _, claim := range s.Claims {
		mc, _ := newModelClaim(s, claim)
		got := o.Claims[claim.Name]
		i, known := index[got.Volume]
		if mc == nil {
			continue
		}
		best, why := choose(mc, pvs, st)
		ok := len(best) == 0 && got.Phase != corev1.ClaimBound ||
			got.Phase == corev1.ClaimBound && known && slices.Contains(best, i)
		if !ok {
			want := "Pending"
			if len(best) > 0 {
				names := make([]string, len(best))
				for k, b := range best {
					names[k] = pvs[b].pv.Name
				}
				want = "Bound to " + strings.Join(names, " or ")
			}
			issues = append(issues, issue{"claim " + s.Namespace + "/" + claim.Name,
				fmt.Sprintf("%s %s, but given the volumes taken before it KCM's rules say %s (%s)",
					got.Phase, got.Volume, want, why)})
		}
		if got.Phase == corev1.ClaimBound && known {
			st |= 1 << i
		}
	}
	return issues
}

func expectation(claim *corev1.PersistentVolumeClaim, outcomes, whys map[string]bool) ClaimExpectation {
	e := ClaimExpectation{Name: claim.Name, Why: strings.Join(sortedKeys(whys), "; ")}
	if outcomes["?"] {
		return e
	}
	if len(outcomes) > 1 {
		e.Why = fmt.Sprintf("%d possible outcomes: %s", len(outcomes), e.Why)
	}
	if outcomes[""] {
		if len(outcomes) == 1 {
			e.PhaseKnown, e.Phase, e.VolumeKnown, e.Volume = true, corev1.ClaimPending, true, claim.Spec.VolumeName
		}
		return e
	}
	e.PhaseKnown, e.Phase = true, corev1.ClaimBound
	e.Candidates = sortedKeys(outcomes)
	if len(e.Candidates) == 1 {
		e.VolumeKnown, e.Volume, e.Candidates = true, e.Candidates[0], nil
	}
	return e
}

func modelPVs(s *Scenario) []*modelPV {
	pvs := make([]*modelPV, len(s.PVs))
	for i, pv := range s.PVs {
		key, n := modeKey(pv.Spec.AccessModes)
		pvs[i] = &modelPV{pv: pv, modes: key, nModes: n, capacity: pv.Spec.Capacity[corev1.ResourceStorage]}
	}
	return pvs
}

// newModelClaim resolves what a claim asks for once the API server has
// admitted it: a nil class becomes the default class, if any.
func newModelClaim(s *Scenario, claim *corev1.PersistentVolumeClaim) (*modelClaim, string) {
	mc := &modelClaim{claim: claim, class: s.DefaultClass()}
	if claim.Spec.StorageClassName != nil {
		mc.class = *claim.Spec.StorageClassName
	}
	for _, c := range s.Classes {
		if c.Name == mc.class && c.VolumeBindingMode != nil {
			mc.delay = *c.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
		}
	}
	if claim.Spec.Selector != nil {
		var err error
		if mc.selector, err = metav1.LabelSelectorAsSelector(claim.Spec.Selector); err != nil {
			return nil, "invalid selector: " + err.Error()
		}
	}
	return mc, ""
}

// choose returns the equally good volumes for a claim when the volumes in st
// are taken (none: it stays Pending), and why.
func choose(c *modelClaim, pvs []*modelPV, st taken) ([]int, string) {
	isTaken := func(i int) bool { return st&(1<<i) != 0 }
	if name := c.claim.Spec.VolumeName; name != "" {
		i := slices.IndexFunc(pvs, func(p *modelPV) bool { return p.pv.Name == name })
		switch {
		case i < 0:
			return nil, "the requested volume does not exist"
		case isTaken(i):
			return nil, "an earlier claim took the requested volume"
		case pvs[i].pv.Spec.ClaimRef == nil:
			if why := unfit(pvs[i], c); why != "" {
				return nil, "the requested volume does not fit: " + why
			}
			return []int{i}, "requested volume, free and fits"
		case preboundTo(pvs[i].pv, c.claim):
			return []int{i}, "requested volume, pre-bound to the claim"
		}
		return nil, "the requested volume is pre-bound to another claim"
	}

	request := c.claim.Spec.Resources.Requests[corev1.ResourceStorage]
	prebound := map[string][]int{}
	regular := map[string][]int{}
	groupSize := map[string]int{}
	for i, p := range pvs {
		if !containsModes(p.pv.Spec.AccessModes, c.claim.Spec.AccessModes) {
			continue
		}
		groupSize[p.modes] = p.nModes
		if p.capacity.Cmp(request) < 0 || volumeMode(p.pv.Spec.VolumeMode) != volumeMode(c.claim.Spec.VolumeMode) {
			continue
		}
		switch {
		case p.pv.Spec.ClaimRef != nil:
			// Only its claim ever takes a pre-bound volume.
			if preboundTo(p.pv, c.claim) && !isTaken(i) {
				prebound[p.modes] = append(prebound[p.modes], i)
			}
		case isTaken(i), c.delay:
		case c.selector != nil && !c.selector.Matches(labels.Set(p.pv.Labels)):
		case p.pv.Spec.StorageClassName != c.class:
		default:
			regular[p.modes] = append(regular[p.modes], i)
		}
	}
	levels := []int{}
	for _, n := range groupSize {
		if !slices.Contains(levels, n) {
			levels = append(levels, n)
		}
	}
	slices.Sort(levels)
	for _, level := range levels {
		var best []int
		for key, n := range groupSize {
			if n != level {
				continue
			}
			if len(prebound[key]) > 0 {
				best = append(best, prebound[key]...)
			} else {
				best = append(best, smallest(pvs, regular[key])...)
			}
		}
		slices.Sort(best)
		switch len(best) {
		case 0:
			continue
		case 1:
			return best, "single best volume"
		}
		return best, fmt.Sprintf("%d equally good volumes with %d access modes", len(best), level)
	}
	if c.delay {
		return nil, "class waits for a first consumer, and no volume is pre-bound to the claim"
	}
	return nil, "no volume fits"
}

// unfit says why a free volume cannot serve a claim that names it, or "".
func unfit(p *modelPV, c *modelClaim) string {
	claim, class := c.claim, c.class
	switch {
	case p.capacity.Cmp(claim.Spec.Resources.Requests[corev1.ResourceStorage]) < 0:
		return "too small"
	case p.pv.Spec.StorageClassName != class:
		return "class differs"
	case volumeMode(p.pv.Spec.VolumeMode) != volumeMode(claim.Spec.VolumeMode):
		return "volume mode differs"
	case !containsModes(p.pv.Spec.AccessModes, claim.Spec.AccessModes):
		return "access modes missing"
	}
	return ""
}

func smallest(pvs []*modelPV, indexes []int) []int {
	var best []int
	for _, i := range indexes {
		switch {
		case len(best) == 0 || pvs[i].capacity.Cmp(pvs[best[0]].capacity) < 0:
			best = []int{i}
		case pvs[i].capacity.Cmp(pvs[best[0]].capacity) == 0:
			best = append(best, i)
		}
	}
	return best
}

// preboundTo reports whether the volume's claimRef names the claim (the
// generator never sets a UID, and the claim's UID is unknown here).
func preboundTo(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.Name == claim.Name && ref.Namespace == claim.Namespace
}

func volumeMode(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
	if m == nil {
		return corev1.PersistentVolumeFilesystem
	}
	return *m
}

var modeOrder = []corev1.PersistentVolumeAccessMode{
	corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod,
}

// modeKey normalizes a set of access modes: distinct modes in a fixed order.
func modeKey(modes []corev1.PersistentVolumeAccessMode) (string, int) {
	var parts []string
	for _, m := range modeOrder {
		if slices.Contains(modes, m) {
			parts = append(parts, string(m))
		}
	}
	return strings.Join(parts, ","), len(parts)
}

func containsModes(have, want []corev1.PersistentVolumeAccessMode) bool {
	for _, m := range want {
		if !slices.Contains(have, m) {
			return false
		}
	}
	return true
}
