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

// fits checks what every candidate must meet, pre-bound or not: size,
// volumeMode, attributes class, access modes, not being deleted and, for a
// node-bound match, node affinity. nodeLabels nil means no node check.
func fits(pv *v1.PersistentVolume, n ClaimNeeds, nodeLabels map[string]string) error {
	if pv.DeletionTimestamp != nil {
		return errors.New("the volume is being deleted")
	}
	capQty := pv.Spec.Capacity[v1.ResourceStorage]
	if capQty.Cmp(n.Request) < 0 {
		return fmt.Errorf("the volume is too small (%s < %s)", capQty.String(), n.Request.String())
	}
	if volumeModeOf(pv.Spec.VolumeMode) != n.Mode {
		return fmt.Errorf("incompatible volumeMode (volume %s, claim %s)", volumeModeOf(pv.Spec.VolumeMode), n.Mode)
	}
	if ptr.Deref(pv.Spec.VolumeAttributesClassName, "") != n.VAC {
		return errors.New("volumeAttributesClassName does not match")
	}
	if !hasAllModes(pv.Spec.AccessModes, n.AccessModes) {
		return errors.New("incompatible access modes")
	}
	if nodeLabels != nil {
		if err := storagehelpers.CheckNodeAffinity(pv, nodeLabels); err != nil {
			return fmt.Errorf("the volume's node affinity excludes the selected node: %v", err)
		}
	}
	return nil
}

// Satisfies checks a volume that a claim names in spec.volumeName: the
// checks of fits plus class (KCM's checkVolumeSatisfyClaim).
func Satisfies(pv *v1.PersistentVolume, n ClaimNeeds) error {
	if c := storagehelpers.GetPersistentVolumeClass(pv); c != n.Class {
		return fmt.Errorf("storageClassName does not match (volume %q, claim %q)", c, n.Class)
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
// (class, volumeMode and access modes are the group's): selector, size,
// phase, node affinity.
func candidate(pv *v1.PersistentVolume, n ClaimNeeds, nodeLabels map[string]string) bool {
	if !available(pv) {
		return false
	}
	if n.Selector != nil && !n.Selector.Matches(labels.Set(pv.Labels)) {
		return false
	}
	return fits(pv, n, nodeLabels) == nil
}

func hasAllModes(have, want []v1.PersistentVolumeAccessMode) bool {
	for _, m := range want {
		if !slices.Contains(have, m) {
			return false
		}
	}
	return true
}
