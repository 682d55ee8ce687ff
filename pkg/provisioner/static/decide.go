package static

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// finalizer is the finalizer external-provisioner puts on the PVs whose
// backend volume it deletes.
const finalizer = storagehelpers.PVDeletionProtectionFinalizer

// Op is what the reclaimer does with a PV.
type Op int

// The ops.
const (
	None Op = iota
	AddFinalizer
	RemoveFinalizer
	Delete
)

// Decide applies the reclaim policy of a statically made CSI PV of
// this driver, as external-provisioner v6 (on its library's v13, with
// HonorPVReclaimPolicy) does and the library v8 that tether runs on does
// not: a Bound PV with Delete gets the deletion finalizer; a Released one
// with Delete has its backend volume deleted, then the PV; Retain and
// Recycle drop the finalizer. PVs that a provisioner made
// (pv.kubernetes.io/provisioned-by) are the library's.
func Decide(pv *v1.PersistentVolume, driver string) Op {
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driver ||
		metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned) {
		return None
	}
	has := slices.Contains(pv.Finalizers, finalizer)
	if pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		if has {
			return RemoveFinalizer
		}
		return None
	}
	switch {
	case pv.Status.Phase == v1.VolumeReleased && (has || pv.DeletionTimestamp == nil):
		return Delete
	case pv.Status.Phase == v1.VolumeBound && !has && pv.DeletionTimestamp == nil:
		return AddFinalizer
	}
	return None
}
