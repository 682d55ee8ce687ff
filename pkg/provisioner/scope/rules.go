package scope

import (
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// recordPrefix begins every key the in-flight record writes on a claim
// (package inflight), and any tether may write in a later format.
const recordPrefix = "provisioner.tether.dev/"

// pvcProtection is the API server's own finalizer on every claim in use;
// it says nothing about whose the claim is.
const pvcProtection = "kubernetes.io/pvc-protection"

// annMigratedTo names, on a claim or PV of an in-tree plugin, the CSI
// driver that took the plugin over.
const annMigratedTo = "pv.kubernetes.io/migrated-to"

// Scope is what one provisioner answers for: the claims and PVs it keeps
// whole in its caches. Everything else is kept as a name only (Seen).
//
// The rules err on the side of keeping: a claim or PV kept without need
// costs memory, one left out could leave a volume, a claim or a namespace
// without the process that must settle it. Tenants write claims, so a
// tenant can make a claim of theirs kept (memory, within their own
// claims) but never make one that carries a record or a finalizer of
// tether's unkept: any record key and any finalizer besides
// kubernetes.io/pvc-protection keeps a claim, whatever the rest says.
type Scope struct {
	// Driver is the CSI driver's name; Migrated the in-tree plugin it
	// takes over (CSI migration), or "".
	Driver, Migrated string
	// Node is this provisioner's node in node-deployment mode, "" in the
	// centralised mode.
	Node string
	// NodeLabels are this node's labels (node-deployment mode): ok false
	// while they are not known, and every PV of the driver is kept then.
	NodeLabels func() (labels map[string]string, ok bool)
}

func (s Scope) ours(name string) bool {
	return name != "" && (name == s.Driver || name == s.Migrated)
}

// Claim reports whether a claim is this provisioner's to keep whole:
//   - it carries any key of an in-flight record (of any node, driver or
//     format: records of a lost node are dropped by the other nodes'
//     provisioners), or any finalizer but the API server's own (the
//     record's, the clone and snapshot source protections', anyone's);
//   - or it is unbound and handed to this driver (the storage-provisioner
//     annotation, either key) and, in node-deployment mode, selected for
//     this node or for none yet.
//
// A bound claim without any of these is read by no part of the
// provisioner (the library skips bound claims; the sweep reads its
// volume's name from Seen).
func (s Scope) Claim(c *v1.PersistentVolumeClaim) bool {
	for k := range c.Annotations {
		if strings.HasPrefix(k, recordPrefix) {
			return true
		}
	}
	for _, f := range c.Finalizers {
		if f != pvcProtection {
			return true
		}
	}
	if c.Spec.VolumeName != "" {
		return false
	}
	provisioner, ok := c.Annotations[storagehelpers.AnnStorageProvisioner]
	if !ok {
		provisioner = c.Annotations[storagehelpers.AnnBetaStorageProvisioner]
	}
	if !s.ours(provisioner) {
		return false
	}
	selected := c.Annotations[storagehelpers.AnnSelectedNode]
	return s.Node == "" || selected == "" || selected == s.Node
}

// KeepClaim reports whether a claim kept before stays kept: while it is
// unbound or being deleted, whatever a tenant removed from it since. A
// claim thus leaves the cache only bound or deleted, and its readers never
// see a live unbound claim vanish.
func KeepClaim(c *v1.PersistentVolumeClaim) bool {
	return c.Spec.VolumeName == "" || c.DeletionTimestamp != nil
}

// Volume reports whether a PV is this provisioner's to keep whole: one it
// answers for (Ours) that is not Settled.
func (s Scope) Volume(pv *v1.PersistentVolume) bool {
	return s.Ours(pv) && !s.Settled(pv)
}

// Ours reports whether the provisioner answers for a PV: a CSI PV of the
// driver, a PV provisioned by it or migrated to it (the annotations the
// library reads), any in-tree PV when the driver takes over an in-tree
// plugin; in node-deployment mode only those whose node affinity this
// node may meet (MayBeOn). PVs are written by admins and controllers, not
// by tenants.
func (s Scope) Ours(pv *v1.PersistentVolume) bool {
	ours := s.ours(pv.Annotations[storagehelpers.AnnDynamicallyProvisioned]) || s.ours(pv.Annotations[annMigratedTo])
	switch {
	case pv.Spec.CSI != nil:
		ours = ours || pv.Spec.CSI.Driver == s.Driver
	case s.Migrated != "":
		ours = true
	}
	if !ours || s.Node == "" {
		return ours
	}
	labels, known := s.NodeLabels()
	return !known || MayBeOn(pv, s.Node, labels)
}

// libraryFinalizer is the deletion finalizer the library (v8, with
// AddFinalizer) keeps on the PVs it provisioned whose reclaim policy is
// Delete, and removes from the others.
const libraryFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"

// Settled reports whether a PV asks nothing of the provisioner as it
// stands: bound, not being deleted, and carrying the deletion finalizer
// exactly when a writer of it would add it, the reclaim policy being
// Delete: the library for a PV provisioned by the driver or migrated to
// it, the static volumes' reclaimer (package static) for a CSI PV of the
// driver that no provisioner claims (no pv.kubernetes.io/provisioned-by),
// as external-provisioner v6 does. No part of the provisioner reads such a
// PV but by name (Seen): the library and the static reclaimer act on a PV
// released, being deleted or whose finalizer is to change; the reconciler
// of a record reads a bound PV from the API server when its claim is
// deleted. Every one of those changes comes as a watch event that makes
// the PV unsettled, and kept whole again. A static Delete PV is thus kept
// until it carries the finalizer: without it, a PV deleted while bound
// would go once released, and its volume with nothing to delete it.
func (s Scope) Settled(pv *v1.PersistentVolume) bool {
	if pv.Status.Phase != v1.VolumeBound || pv.DeletionTimestamp != nil {
		return false
	}
	provisioned := s.ours(pv.Annotations[storagehelpers.AnnDynamicallyProvisioned]) || s.ours(pv.Annotations[annMigratedTo])
	static := pv.Spec.CSI != nil && pv.Spec.CSI.Driver == s.Driver &&
		!metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned)
	want := (provisioned || static) && pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete
	return slices.Contains(pv.Finalizers, libraryFinalizer) == want
}

// MayBeOn reports whether node (of name and labels) meets pv's required
// node affinity, or may once it has labels it lacks now: an expression on
// a label the node does not have counts as met. So only a label whose
// value changes, or that is removed, can make a PV refused here one that
// node meets (NarrowedLabels). A PV without a required affinity is on
// every node.
func MayBeOn(pv *v1.PersistentVolume, name string, labels map[string]string) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil || len(pv.Spec.NodeAffinity.Required.NodeSelectorTerms) == 0 {
		return true
	}
	for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		if termMayMatch(t, name, labels) {
			return true
		}
	}
	return false
}

func termMayMatch(t v1.NodeSelectorTerm, name string, labels map[string]string) bool {
	for _, e := range t.MatchExpressions {
		v, has := labels[e.Key]
		if has && !requirementMet(e, v) {
			return false
		}
	}
	for _, f := range t.MatchFields {
		if f.Key == metav1.ObjectNameField && !requirementMet(f, name) {
			return false
		}
	}
	return true
}

// requirementMet says whether a label (or field) of value v meets r; an
// operator or number it cannot read counts as met.
func requirementMet(r v1.NodeSelectorRequirement, v string) bool {
	switch r.Operator {
	case v1.NodeSelectorOpIn:
		return slices.Contains(r.Values, v)
	case v1.NodeSelectorOpNotIn:
		return !slices.Contains(r.Values, v)
	case v1.NodeSelectorOpDoesNotExist:
		return false
	case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
		if len(r.Values) != 1 {
			return true
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return true
		}
		if r.Operator == v1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return true
}

// NarrowedLabels reports whether a node's labels changed from before to
// after in a way that can make MayBeOn true for a PV it was false for: a
// label removed, or given another value. Labels added never can.
func NarrowedLabels(before, after map[string]string) bool {
	return len(NarrowedKeys(before, after)) > 0
}

// NarrowedKeys are the keys of the labels that changed from before to
// after as NarrowedLabels counts: removed, or given another value; sorted,
// nil when none did.
func NarrowedKeys(before, after map[string]string) []string {
	var keys []string
	for k, v := range before {
		if w, ok := after[k]; !ok || w != v {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// KeepVolume reports whether a PV kept before stays kept: until it is
// settled (or deleted), whatever an admin changed of what made it the
// provisioner's.
func (s Scope) KeepVolume(pv *v1.PersistentVolume) bool { return !s.Settled(pv) }
