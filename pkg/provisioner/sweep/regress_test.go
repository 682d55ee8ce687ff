package sweep

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Whole-life scenarios of disks that PVs kept or named, the mark saying
// Delete. They use only the world's helpers, not the sweep's insides.

// TestSweepKeepsDiskRetainedThenDeleted: a volume made for a Delete class
// (its mark says Delete) whose PV an admin patched to Retain, whose claim
// went, and whose PV the admin then deleted to import the disk elsewhere,
// is kept: the sweep reports it and never deletes it.
func TestSweepKeepsDiskRetainedThenDeleted(t *testing.T) {
	w := newSweepWorld(t, Delete)
	w.baseline()
	// Provisioned while the sweeper watched: the claim, the volume
	// marked for its Delete class, the bound PV.
	c := sweepClaim("a", uidA, "")
	w.addClaim(c, false)
	w.volume(volA, "", oursDelete)
	pv := sweepPV(volA, driverNm, volA)
	pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimDelete
	w.addPV(pv, false)
	w.sweep(time.Hour)
	// The admin keeps the disk: Retain, the claim goes, the Released PV
	// is deleted.
	pv = pv.DeepCopy()
	pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
	w.updatePV(pv)
	w.deleteClaim(c)
	pv = pv.DeepCopy()
	pv.Status.Phase = v1.VolumeReleased
	w.updatePV(pv)
	w.sweep(time.Hour)
	w.deletePV(pv)
	for range 4 {
		w.sweep(2 * time.Hour)
	}
	if d := w.driver.deletedIDs(); len(d) != 0 {
		t.Fatalf("the sweep deleted %v, a disk the admin kept", d)
	}
	if !slices.ContainsFunc(w.recorded(), func(e string) bool {
		return strings.HasPrefix(e, v1.EventTypeWarning+" "+ReasonOrphanVolume+" backend volume "+volA+" ")
	}) {
		t.Errorf("the kept disk is not reported")
	}
	if got := w.kept()[volA]; got != "retained-by-pv" {
		t.Errorf("the report list says %q of the kept disk, want retained-by-pv", got)
	}
}

// TestSweepCountsMigratedInTreePV: a volume of the EBS CSI driver named
// only by an in-tree awsElasticBlockStore PV (the plugin migrated to it)
// is accounted for, and is kept after that PV goes.
func TestSweepCountsMigratedInTreePV(t *testing.T) {
	const driver, id = "ebs.csi.aws.com", "vol-0123456789abcdef0"
	w := newSweepWorld(t, Delete, driver)
	w.baseline()
	w.volume(volA, id, oursDelete)
	pv := &v1.PersistentVolume{}
	pv.Name = "imported-disk"
	pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimDelete
	pv.Spec.AWSElasticBlockStore = &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-east-1a/" + id}
	w.addPV(pv, false)
	for range 3 {
		w.sweep(2 * time.Hour)
	}
	if d := w.driver.deletedIDs(); len(d) != 0 {
		t.Fatalf("the sweep deleted %v, named by in-tree PV %s", d, pv.Name)
	}
	if e := w.recorded(); len(e) != 0 {
		t.Errorf("a volume an in-tree PV names is reported: %q", e)
	}
	w.deletePV(pv)
	for range 3 {
		w.sweep(2 * time.Hour)
	}
	if d := w.driver.deletedIDs(); len(d) != 0 {
		t.Fatalf("the sweep deleted %v once in-tree PV %s went", d, pv.Name)
	}
	if got := w.kept()[id]; got != "named-by-pv" {
		t.Errorf("the report list says %q of it, want named-by-pv", got)
	}
}
