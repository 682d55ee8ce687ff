// Package inflight names the record that tether's provisioner keeps on a
// claim while a backend volume may exist for it that no PV tracks yet, and
// says when that record may go. The binder reads it too: when it binds a
// claim to the PV provisioned for it, it drops the record in the same
// write, which saves the provisioner a write of its own.
package inflight

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// Finalizer on a claim records durably that a backend volume may exist for
// it and no PV tracks it yet. The provisioner adds it before the first
// CreateVolume; it goes once the PV is saved, or once the volume is known
// not to exist.
const Finalizer = "provisioner.tether.dev/volume-in-flight"

// Holds reports whether a claim carries the record.
func Holds(claim *v1.PersistentVolumeClaim) bool {
	return slices.Contains(claim.Finalizers, Finalizer)
}

// Tracks reports whether pv is the volume provisioned for claim, so that
// the backend volume made for the claim is tracked by a saved PV.
func Tracks(pv *v1.PersistentVolume, claim *v1.PersistentVolumeClaim) bool {
	return pv != nil && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == claim.UID &&
		metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned)
}

// Settle removes the record from claim when pv tracks its volume, and
// reports whether it did. The claim is changed in place: call it on a copy
// that is about to be written.
func Settle(claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) bool {
	if !Holds(claim) || !Tracks(pv, claim) {
		return false
	}
	claim.Finalizers = slices.DeleteFunc(claim.Finalizers, func(f string) bool { return f == Finalizer })
	if len(claim.Finalizers) == 0 {
		claim.Finalizers = nil
	}
	return true
}
