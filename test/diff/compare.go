package diff

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClaimState is the observed outcome of one claim.
type ClaimState struct {
	Phase  corev1.PersistentVolumeClaimPhase
	Volume string // spec.volumeName
	UID    string
}

// PVState is the observed outcome of one volume.
type PVState struct {
	Phase    corev1.PersistentVolumePhase
	ClaimRef string // "namespace/name", "" without claimRef
	ClaimUID string
}

// Observed is the state of a scenario's objects on one control plane, by
// object name.
type Observed struct {
	Claims map[string]ClaimState
	PVs    map[string]PVState
}

// Signature is a stable text form of the outcome, to tell when it stops
// changing.
func (o Observed) Signature() string {
	var b strings.Builder
	for _, name := range sortedKeys(o.Claims) {
		c := o.Claims[name]
		fmt.Fprintf(&b, "c %s %s %s\n", name, c.Phase, c.Volume)
	}
	for _, name := range sortedKeys(o.PVs) {
		p := o.PVs[name]
		fmt.Fprintf(&b, "v %s %s %s %s\n", name, p.Phase, p.ClaimRef, p.ClaimUID)
	}
	return b.String()
}

// Difference is one disagreement between KCM's binder and ours.
type Difference struct {
	Seed   int64
	Object string // "claim diff-3/claim-1", "pv d3-pv-2"
	Field  string // phase, volume, consistency, decision
	KCM    string
	Ours   string
	Note   string
}

func (d Difference) String() string {
	if d.Field == "decision" || d.Field == "consistency" {
		return fmt.Sprintf("seed %d %s %s: ours %s", d.Seed, d.Object, d.Field, d.Ours)
	}
	s := fmt.Sprintf("seed %d %s %s: KCM=%q ours=%q", d.Seed, d.Object, d.Field, d.KCM, d.Ours)
	if d.Note != "" {
		s += " (" + d.Note + ")"
	}
	return s
}

// Compare holds our binder's outcome against KCM's where the analysis says
// the outcome is determined, and checks that ours is internally consistent.
// It returns the differences and how many claims it compared. Pure.
func Compare(s *Scenario, a *Analysis, kcm, ours Observed) (diffs []Difference, compared int) {
	add := func(object, field, k, o, note string) {
		diffs = append(diffs, Difference{Seed: s.Seed, Object: object, Field: field, KCM: k, Ours: o, Note: note})
	}
	for _, e := range a.Claims {
		if !e.PhaseKnown {
			continue
		}
		compared++
		obj := "claim " + s.Namespace + "/" + e.Name
		k, o := kcm.Claims[e.Name], ours.Claims[e.Name]
		if k.Phase != o.Phase {
			add(obj, "phase", string(k.Phase), string(o.Phase), e.Why)
			continue
		}
		switch {
		case e.VolumeKnown && k.Volume != o.Volume:
			add(obj, "volume", k.Volume, o.Volume, e.Why)
		case !e.VolumeKnown && o.Phase == corev1.ClaimBound && !slices.Contains(e.Candidates, o.Volume):
			add(obj, "volume", k.Volume, o.Volume,
				fmt.Sprintf("ours is not one of the equally good volumes %v", e.Candidates))
		}
	}
	for _, e := range a.PVs {
		if !e.PhaseKnown {
			continue
		}
		k, o := kcm.PVs[e.Name], ours.PVs[e.Name]
		if k.Phase != o.Phase {
			add("pv "+e.Name, "phase", string(k.Phase), string(o.Phase), "")
		}
	}
	for _, issue := range consistency(s, ours) {
		add(issue.object, "consistency", "", issue.text, "")
	}
	// A wrong decision that changed no compared outcome of its own claim
	// (its other outcome was possible after another choice) is a
	// difference too: it is why later claims differ, if any do.
	for _, issue := range replay(s, ours) {
		if !slices.ContainsFunc(diffs, func(d Difference) bool { return d.Object == issue.object }) {
			add(issue.object, "decision", "", issue.text, "")
		}
	}
	slices.SortStableFunc(diffs, func(a, b Difference) int { return cmpObject(a.Object, b.Object) })
	return diffs, compared
}

// cmpObject orders claims before volumes, each in creation order.
func cmpObject(a, b string) int {
	ka, kb := objectKey(a), objectKey(b)
	switch {
	case ka < kb:
		return -1
	case ka > kb:
		return 1
	}
	return 0
}

func objectKey(object string) string {
	kind, name, _ := strings.Cut(object, " ")
	i := strings.LastIndexByte(name, '-')
	n, err := strconv.Atoi(name[i+1:])
	if err != nil {
		return kind + " " + name
	}
	return fmt.Sprintf("%s %s%08d", kind, name[:i+1], n)
}

// ModelNotes lists where KCM's outcome disagrees with the analysis, and
// KCM's own inconsistencies. They point at a gap in the analysis (or a KCM
// race), not at our binder, so the harness reports them apart.
func ModelNotes(s *Scenario, a *Analysis, kcm Observed) []string {
	var notes []string
	for _, e := range a.Claims {
		got := kcm.Claims[e.Name]
		switch {
		case !e.PhaseKnown:
		case got.Phase != e.Phase:
			notes = append(notes, fmt.Sprintf("seed %d claim %s: KCM phase %s, analysis %s (%s)", s.Seed, e.Name, got.Phase, e.Phase, e.Why))
		case e.VolumeKnown && got.Volume != e.Volume:
			notes = append(notes, fmt.Sprintf("seed %d claim %s: KCM volume %q, analysis %q (%s)", s.Seed, e.Name, got.Volume, e.Volume, e.Why))
		case !e.VolumeKnown && !slices.Contains(e.Candidates, got.Volume):
			notes = append(notes, fmt.Sprintf("seed %d claim %s: KCM volume %q, analysis candidates %v", s.Seed, e.Name, got.Volume, e.Candidates))
		}
	}
	for _, e := range a.PVs {
		if got := kcm.PVs[e.Name]; e.PhaseKnown && got.Phase != e.Phase {
			notes = append(notes, fmt.Sprintf("seed %d pv %s: KCM phase %s, analysis %s", s.Seed, e.Name, got.Phase, e.Phase))
		}
	}
	for _, issue := range consistency(s, kcm) {
		notes = append(notes, fmt.Sprintf("seed %d %s: KCM inconsistent: %s", s.Seed, issue.object, issue.text))
	}
	for _, issue := range replay(s, kcm) {
		notes = append(notes, fmt.Sprintf("seed %d %s: KCM decision: %s", s.Seed, issue.object, issue.text))
	}
	return notes
}

type issue struct{ object, text string }

// consistency checks that claims and volumes point at each other: a Bound
// claim names a Bound volume of the scenario whose claimRef holds the claim's
// UID, and a volume whose claimRef has a UID is held by that claim. Pure.
func consistency(s *Scenario, o Observed) []issue {
	var issues []issue
	for _, name := range sortedKeys(o.Claims) {
		c := o.Claims[name]
		obj := "claim " + s.Namespace + "/" + name
		if c.Phase != corev1.ClaimBound {
			continue
		}
		pv, ok := o.PVs[c.Volume]
		switch {
		case !ok:
			issues = append(issues, issue{obj, fmt.Sprintf("Bound to %q, which is not a volume of the scenario", c.Volume)})
		case pv.ClaimRef != s.Namespace+"/"+name || pv.ClaimUID != c.UID:
			issues = append(issues, issue{obj, fmt.Sprintf("Bound to %s whose claimRef is %q uid %q", c.Volume, pv.ClaimRef, pv.ClaimUID)})
		case pv.Phase != corev1.VolumeBound:
			issues = append(issues, issue{obj, fmt.Sprintf("Bound to %s in phase %s", c.Volume, pv.Phase)})
		}
	}
	for _, name := range sortedKeys(o.PVs) {
		pv := o.PVs[name]
		if pv.ClaimUID == "" {
			continue
		}
		obj := "pv " + name
		ns, claimName, _ := strings.Cut(pv.ClaimRef, "/")
		c, ok := o.Claims[claimName]
		switch {
		case ns != s.Namespace || !ok:
			issues = append(issues, issue{obj, fmt.Sprintf("claimRef %s is not a claim of the scenario", pv.ClaimRef)})
		case c.UID != pv.ClaimUID || c.Volume != name || c.Phase != corev1.ClaimBound:
			issues = append(issues, issue{obj, fmt.Sprintf("claimRef %s, but the claim is %s with volume %q", pv.ClaimRef, c.Phase, c.Volume)})
		}
	}
	return issues
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Describe is a one-line-per-object listing of a scenario, for reports.
func Describe(s *Scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario seed %d (namespace %s):\n", s.Seed, s.Namespace)
	for _, c := range s.Classes {
		fmt.Fprintf(&b, "  class %s binding=%s default=%v\n", c.Name, *c.VolumeBindingMode, c.Annotations[DefaultClassAnnotation] == "true")
	}
	if s.MissingClass != "" {
		fmt.Fprintf(&b, "  class %s is named but never created\n", s.MissingClass)
	}
	for _, pv := range s.PVs {
		ref := ""
		if pv.Spec.ClaimRef != nil {
			ref = " claimRef=" + pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name
		}
		size := pv.Spec.Capacity[corev1.ResourceStorage]
		modes, _ := modeKey(pv.Spec.AccessModes)
		fmt.Fprintf(&b, "  pv %s class=%q size=%s modes=%s volumeMode=%s labels=%v%s\n",
			pv.Name, pv.Spec.StorageClassName, size.String(), modes, modeString(pv.Spec.VolumeMode), pv.Labels, ref)
	}
	for _, c := range s.Claims {
		class := "<nil>"
		if c.Spec.StorageClassName != nil {
			class = fmt.Sprintf("%q", *c.Spec.StorageClassName)
		}
		size := c.Spec.Resources.Requests[corev1.ResourceStorage]
		modes, _ := modeKey(c.Spec.AccessModes)
		extra := ""
		if c.Spec.Selector != nil {
			extra += " selector=" + metav1.FormatLabelSelector(c.Spec.Selector)
		}
		if c.Spec.VolumeName != "" {
			extra += " volumeName=" + c.Spec.VolumeName
		}
		fmt.Fprintf(&b, "  claim %s class=%s size=%s modes=%s volumeMode=%s%s\n",
			c.Name, class, size.String(), modes, modeString(c.Spec.VolumeMode), extra)
	}
	return b.String()
}

func modeString(m *corev1.PersistentVolumeMode) string {
	if m == nil {
		return "<nil>"
	}
	return string(*m)
}
