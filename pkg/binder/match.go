package binder

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

// ClaimNeeds is what a claim asks of a volume, parsed once and checked for
// bad input. Matching works on it, never on the raw claim.
type ClaimNeeds struct {
	Namespace, Name string
	UID             string
	Class           string
	VAC             string
	Mode            v1.PersistentVolumeMode
	AccessModes     []v1.PersistentVolumeAccessMode
	Request         resource.Quantity
	Selector        labels.Selector // nil when the claim has none
}

// ParseClaim reads a claim's needs. An error describes bad input that no
// volume can satisfy; the caller reports it in an event.
func ParseClaim(claim *v1.PersistentVolumeClaim) (ClaimNeeds, error) {
	n := ClaimNeeds{
		Namespace:   claim.Namespace,
		Name:        claim.Name,
		UID:         string(claim.UID),
		Class:       storagehelpers.GetPersistentVolumeClaimClass(claim),
		VAC:         ptr.Deref(claim.Spec.VolumeAttributesClassName, ""),
		Mode:        volumeModeOf(claim.Spec.VolumeMode),
		AccessModes: claim.Spec.AccessModes,
	}
	var problems []string
	req, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]
	switch {
	case !ok:
		problems = append(problems, "the claim requests no storage (spec.resources.requests.storage is missing)")
	case req.Sign() < 0:
		problems = append(problems, fmt.Sprintf("the claim requests a negative size %s", req.String()))
	}
	n.Request = req
	if n.Mode != v1.PersistentVolumeFilesystem && n.Mode != v1.PersistentVolumeBlock {
		problems = append(problems, fmt.Sprintf("unknown volumeMode %q (want Filesystem or Block)", n.Mode))
	}
	if len(n.AccessModes) == 0 {
		problems = append(problems, "the claim has no access modes")
	}
	if claim.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(claim.Spec.Selector)
		if err != nil {
			problems = append(problems, fmt.Sprintf("invalid label selector: %v", err))
		} else {
			n.Selector = sel
		}
	}
	if len(problems) > 0 {
		return n, errors.New(strings.Join(problems, "; "))
	}
	return n, nil
}

func volumeModeOf(m *v1.PersistentVolumeMode) v1.PersistentVolumeMode {
	if m == nil {
		return v1.PersistentVolumeFilesystem
	}
	return *m
}

// Key is the claim's namespace/name.
func (n ClaimNeeds) Key() string { return n.Namespace + "/" + n.Name }

// PreBoundTo reports whether the volume's claimRef names this claim by
// namespace and name, with no UID or this claim's UID.
func PreBoundTo(pv *v1.PersistentVolume, n ClaimNeeds) bool {
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.Namespace == n.Namespace && ref.Name == n.Name &&
		(ref.UID == "" || string(ref.UID) == n.UID)
}

// MismatchReason names why a volume is no match for a claim. The values are
// stable: kubectl-tether prints them in its JSON output.
type MismatchReason string

// The reasons, in the order Reject checks them.
const (
	// MismatchClaimed: the volume's claimRef names another claim.
	MismatchClaimed MismatchReason = "ClaimedByAnother"
	// MismatchNoNode: the class waits for the first consumer, no node is
	// selected yet, and only a volume pre-bound to the claim is taken then.
	MismatchNoNode MismatchReason = "WaitingForNode"
	// MismatchClass: the volume's StorageClass is not the claim's.
	MismatchClass MismatchReason = "StorageClass"
	// MismatchPhase: the volume is not Available (nor new).
	MismatchPhase MismatchReason = "Phase"
	// MismatchSelector: the volume's labels do not match the claim's selector.
	MismatchSelector MismatchReason = "Selector"
	// MismatchDeleting: the volume is being deleted.
	MismatchDeleting MismatchReason = "BeingDeleted"
	// MismatchSize: the volume is smaller than the request.
	MismatchSize MismatchReason = "TooSmall"
	// MismatchVolumeMode: Filesystem against Block.
	MismatchVolumeMode MismatchReason = "VolumeMode"
	// MismatchVAC: the VolumeAttributesClass differs.
	MismatchVAC MismatchReason = "VolumeAttributesClass"
	// MismatchAccessModes: the volume lacks an access mode the claim asks for.
	MismatchAccessModes MismatchReason = "AccessModes"
	// MismatchNodeAffinity: the volume's node affinity excludes the selected node.
	MismatchNodeAffinity MismatchReason = "NodeAffinity"
)

// Mismatch is the first reason a volume is no match for a claim, typed and
// in words. It is an error: Satisfies returns it.
type Mismatch struct {
	Reason  MismatchReason
	Message string
}

func (m *Mismatch) Error() string { return m.Message }

func mismatch(r MismatchReason, format string, args ...any) *Mismatch {
	return &Mismatch{Reason: r, Message: fmt.Sprintf(format, args...)}
}

// Reject returns the first reason the binder's search for the claim q.Needs
// (a claim with no spec.volumeName) passes over pv, or nil when pv is one of
// the volumes the search may take; Index.Reserve picks the best of those.
// The search (Index.match) runs the same checks: fits for a volume
// pre-bound to the claim, and for an unclaimed one its index group (class,
// volumeMode, access modes) then candidate. A reservation by another claim
// in the binder's memory is not seen here.
func Reject(pv *v1.PersistentVolume, q MatchQuery) *Mismatch {
	n := q.Needs
	if ref := pv.Spec.ClaimRef; ref != nil {
		if !PreBoundTo(pv, n) {
			return mismatch(MismatchClaimed, "the volume is claimed by %s/%s", ref.Namespace, ref.Name)
		}
		return fitMismatch(pv, n, q.NodeLabels)
	}
	if q.DelayBinding && q.NodeLabels == nil {
		return mismatch(MismatchNoNode, "the class waits for the first consumer: until a node is selected only a volume pre-bound to the claim is taken")
	}
	if c := storagehelpers.GetPersistentVolumeClass(pv); c != n.Class {
		return mismatch(MismatchClass, "storageClassName does not match (volume %q, claim %q)", c, n.Class)
	}
	if m := volumeModeOf(pv.Spec.VolumeMode); m != n.Mode {
		return volumeModeMismatch(m, n.Mode)
	}
	if !hasAllModes(pv.Spec.AccessModes, n.AccessModes) {
		return accessModesMismatch(pv, n)
	}
	return unclaimedMismatch(pv, n, q.NodeLabels)
}

// fitMismatch checks what every candidate must meet, pre-bound or not:
// not being deleted, size, volumeMode, attributes class, access modes and,
// for a node-bound match, node affinity. nodeLabels nil means no node check.
func fitMismatch(pv *v1.PersistentVolume, n ClaimNeeds, nodeLabels map[string]string) *Mismatch {
	if pv.DeletionTimestamp != nil {
		return mismatch(MismatchDeleting, "the volume is being deleted")
	}
	capQty := pv.Spec.Capacity[v1.ResourceStorage]
	if capQty.Cmp(n.Request) < 0 {
		return mismatch(MismatchSize, "the volume is too small (%s < %s)", capQty.String(), n.Request.String())
	}
	if m := volumeModeOf(pv.Spec.VolumeMode); m != n.Mode {
		return volumeModeMismatch(m, n.Mode)
	}
	if ptr.Deref(pv.Spec.VolumeAttributesClassName, "") != n.VAC {
		return mismatch(MismatchVAC, "volumeAttributesClassName does not match (volume %q, claim %q)",
			ptr.Deref(pv.Spec.VolumeAttributesClassName, ""), n.VAC)
	}
	if !hasAllModes(pv.Spec.AccessModes, n.AccessModes) {
		return accessModesMismatch(pv, n)
	}
	if nodeLabels != nil {
		if err := storagehelpers.CheckNodeAffinity(pv, nodeLabels); err != nil {
			return mismatch(MismatchNodeAffinity, "the volume's node affinity excludes the selected node: %v", err)
		}
	}
	return nil
}

// unclaimedMismatch checks an unclaimed volume beyond its index group:
// phase, selector, then fitMismatch.
func unclaimedMismatch(pv *v1.PersistentVolume, n ClaimNeeds, nodeLabels map[string]string) *Mismatch {
	if !available(pv) {
		if pv.Spec.ClaimRef != nil {
			return mismatch(MismatchClaimed, "the volume is claimed by %s/%s", pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name)
		}
		return mismatch(MismatchPhase, "the volume is %s, not Available", pv.Status.Phase)
	}
	if n.Selector != nil && !n.Selector.Matches(labels.Set(pv.Labels)) {
		return mismatch(MismatchSelector, "the volume's labels do not match the claim's selector %q", n.Selector.String())
	}
	return fitMismatch(pv, n, nodeLabels)
}

func volumeModeMismatch(volume, claim v1.PersistentVolumeMode) *Mismatch {
	return mismatch(MismatchVolumeMode, "incompatible volumeMode (volume %s, claim %s)", volume, claim)
}

func accessModesMismatch(pv *v1.PersistentVolume, n ClaimNeeds) *Mismatch {
	return mismatch(MismatchAccessModes, "incompatible access modes (volume %s, claim %s)",
		joinModes(pv.Spec.AccessModes), joinModes(n.AccessModes))
}

func joinModes(modes []v1.PersistentVolumeAccessMode) string {
	if len(modes) == 0 {
		return "none"
	}
	s := make([]string, len(modes))
	for i, m := range modes {
		s[i] = string(m)
	}
	return strings.Join(s, ",")
}

// fits is fitMismatch as an error, for the index's search.
func fits(pv *v1.PersistentVolume, n ClaimNeeds, nodeLabels map[string]string) error {
	if m := fitMismatch(pv, n, nodeLabels); m != nil {
		return m
	}
	return nil
}

// Satisfies checks a volume that a claim names in spec.volumeName: the
// checks of fits plus class (KCM's checkVolumeSatisfyClaim).
func Satisfies(pv *v1.PersistentVolume, n ClaimNeeds) error {
	if c := storagehelpers.GetPersistentVolumeClass(pv); c != n.Class {
		return mismatch(MismatchClass, "storageClassName does not match (volume %q, claim %q)", c, n.Class)
	}
	return fits(pv, n, nil)
}

// available reports whether an unclaimed volume may be taken by any claim.
// A new volume (phase "" or Pending) counts: the volume worker would make it
// Available, and a resourceVersion-checked write settles any race.
func available(pv *v1.PersistentVolume) bool {
	if pv.Spec.ClaimRef != nil {
		return false
	}
	switch pv.Status.Phase {
	case "", v1.VolumePending, v1.VolumeAvailable:
		return true
	}
	return false
}

// candidate checks an unclaimed volume for a claim, beyond its index group
// (class, volumeMode and access modes are the group's): phase, selector,
// then fits. It is unclaimedMismatch, which Reject runs too.
func candidate(pv *v1.PersistentVolume, n ClaimNeeds, nodeLabels map[string]string) bool {
	return unclaimedMismatch(pv, n, nodeLabels) == nil
}

func hasAllModes(have, want []v1.PersistentVolumeAccessMode) bool {
	for _, m := range want {
		if !slices.Contains(have, m) {
			return false
		}
	}
	return true
}
