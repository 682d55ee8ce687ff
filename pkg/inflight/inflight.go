package inflight

import (
	"maps"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// Finalizer on a claim records durably that a backend volume may exist for
// it and no PV tracks it yet. The provisioner adds it before the first
// CreateVolume; it goes once the PV is saved, or once the volume is known
// not to exist.
const Finalizer = "provisioner.tether.dev/volume-in-flight"

// AnnVolume and AnnDriver, written with Finalizer, name the volume the
// record is for (the PV's name, which is also the CreateVolume name) and
// its driver. AnnNode, in node-deployment mode, names the node whose
// provisioner called CreateVolume: its local volume is the one the record
// stands for, and only that provisioner may settle or clean it up.
//
// Claims are written by namespace users, so none of these is trusted to
// choose a backend volume: the provisioner derives the volume's name from
// the claim's UID and reads a clone's or restore's source again from the
// objects the claim names (see docs/design.md, "Threat model"). They say
// which provisioner a record belongs to, and let a binder drop the record
// in its bind write.
//
// AnnSource and AnnSnapshot were written by earlier versions (the handle
// of a clone's source, of a restore's snapshot); they are no longer
// written nor read, only removed with the record.
const (
	AnnVolume   = "provisioner.tether.dev/in-flight-volume"
	AnnDriver   = "provisioner.tether.dev/in-flight-driver"
	AnnNode     = "provisioner.tether.dev/in-flight-node"
	AnnSource   = "provisioner.tether.dev/in-flight-source"
	AnnSnapshot = "provisioner.tether.dev/in-flight-snapshot"
)

// recordAnnotations are every annotation the record writes.
var recordAnnotations = []string{AnnVolume, AnnDriver, AnnNode, AnnFormat, AnnSource, AnnSnapshot}

// Holds reports whether a claim carries the record.
func Holds(claim *v1.PersistentVolumeClaim) bool {
	return slices.Contains(claim.Finalizers, Finalizer)
}

// Unread reports whether a claim holds a record of a format this version
// does not read: one to leave as it is.
func Unread(claim *v1.PersistentVolumeClaim) bool {
	_, read := Format(claim)
	return Holds(claim) && !read
}

// Record adds the record for the volume name of driver to claim, in place
// (call it on a copy that is about to be written), in FormatWritten. It
// reports whether the claim changed. A record of the same volume in a
// format this version reads is left as it is; the caller must not call it
// on a record it does not read (Unread).
func Record(claim *v1.PersistentVolumeClaim, driver, name string) bool {
	if _, read := Format(claim); read && Holds(claim) && claim.Annotations[AnnVolume] == name && claim.Annotations[AnnDriver] == driver {
		return false
	}
	if !Holds(claim) {
		claim.Finalizers = append(claim.Finalizers, Finalizer)
	}
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	claim.Annotations[AnnVolume], claim.Annotations[AnnDriver] = name, driver
	claim.Annotations[AnnFormat] = strconv.Itoa(FormatWritten)
	return true
}

// Volume returns the driver and volume name a claim's record is for; ok is
// false when the claim holds no record or the record names no volume (a
// record written by an older tether).
func Volume(claim *v1.PersistentVolumeClaim) (driver, name string, ok bool) {
	driver, name = claim.Annotations[AnnDriver], claim.Annotations[AnnVolume]
	return driver, name, Holds(claim) && driver != "" && name != ""
}

// Tracks reports whether pv is the volume the claim's record is for: the
// same name and driver, pre-bound to this claim. Then the backend volume
// made for the claim is tracked by a saved PV. A record of a format this
// version does not read is never tracked.
func Tracks(pv *v1.PersistentVolume, claim *v1.PersistentVolumeClaim) bool {
	driver, name, ok := Volume(claim)
	return ok && !Unread(claim) && pv != nil && pv.Name == name && pv.Spec.CSI != nil && pv.Spec.CSI.Driver == driver &&
		pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == claim.UID
}

// Forget removes the record from claim, in place, and reports whether the
// claim changed.
func Forget(claim *v1.PersistentVolumeClaim) bool {
	annotated := false
	for _, k := range recordAnnotations {
		_, has := claim.Annotations[k]
		annotated = annotated || has
	}
	if !Holds(claim) && !annotated {
		return false
	}
	claim.Finalizers = slices.DeleteFunc(claim.Finalizers, func(f string) bool { return f == Finalizer })
	if len(claim.Finalizers) == 0 {
		claim.Finalizers = nil
	}
	if annotated {
		for _, k := range recordAnnotations {
			delete(claim.Annotations, k)
		}
		if len(claim.Annotations) == 0 {
			claim.Annotations = nil
		}
	}
	return true
}

// Settle removes the record from claim when pv tracks the volume it is
// for, and reports whether it did. The claim is changed in place: call it
// on a copy that is about to be written.
func Settle(claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) bool {
	return Tracks(pv, claim) && Forget(claim)
}

// Strip returns a copy of claim without the record, for comparing claims
// apart from it. The copy is shallow but for its annotations and
// finalizers: it shares the rest with claim, so it is for reading only (a
// deep copy of each claim, in an informer's event handler, was 2% of the
// provisioner's CPU).
func Strip(claim *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	c := *claim
	c.Annotations = maps.Clone(claim.Annotations)
	c.Finalizers = slices.Clone(claim.Finalizers)
	Forget(&c)
	return &c
}
