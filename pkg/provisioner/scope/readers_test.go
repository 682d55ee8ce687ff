package scope_test

import (
	"math/rand/v2"
	"slices"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/nodeloss"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	"github.com/tether-csi/tether/pkg/provisioner/records"
	"github.com/tether-csi/tether/pkg/provisioner/static"
)

// The readers of the provisioner's caches, each as the decision that
// makes it act on a claim or a PV it finds there: its own pure decision
// where the code has one (static.Decide, records.Decide,
// protect.CloneInProgress and RestoreInProgress), else the conditions of
// the code that decides, written out here (the library's, and the parts of
// Provisioner.ShouldProvision and ShouldDelete that read the object). Each
// errs towards acting: it may say a reader acts where the real one would
// not (a class or a node read elsewhere), never the reverse.

// pvReader is one reader of the PV cache: whether it acts on pv.
type pvReader struct {
	name string
	acts func(ts testScope, pv *v1.PersistentVolume) bool
}

var pvReaders = []pvReader{
	// The static volumes' reclaimer (static.Reclaimer.Reconcile): the
	// Deleter's ShouldDelete, then static.Decide.
	{"static.Decide", func(ts testScope, pv *v1.PersistentVolume) bool {
		return tetherShouldDelete(ts, pv) && static.Decide(pv, ts.s.Driver) != static.None
	}},
	// The library v8's delete path (ProvisionController.syncVolume):
	// shouldDelete, which asks the Provisioner's ShouldDelete first.
	{"library shouldDelete", func(ts testScope, pv *v1.PersistentVolume) bool {
		return tetherShouldDelete(ts, pv) && libraryShouldDelete(ts, pv)
	}},
	// The library v8's finalizer path (handleProtectionFinalizer, with
	// AddFinalizer(true)): it removes the deletion finalizer under Retain
	// or Recycle and adds it under Delete to a PV not being deleted. It
	// edits its copy of every PV of its informer, and writes only those it
	// answers for (updatePersistentVolume: provisioned by the driver, or
	// migrated to it).
	{"library handleProtectionFinalizer", func(ts testScope, pv *v1.PersistentVolume) bool {
		owned := pv.Annotations[storagehelpers.AnnDynamicallyProvisioned] == ts.s.Driver ||
			pv.Annotations[storagehelpers.AnnMigratedTo] == ts.s.Driver
		has := slices.Contains(pv.Finalizers, libFinalizer)
		policy := pv.Spec.PersistentVolumeReclaimPolicy
		change := (policy == v1.PersistentVolumeReclaimRetain || policy == v1.PersistentVolumeReclaimRecycle) && has ||
			policy == v1.PersistentVolumeReclaimDelete && pv.DeletionTimestamp == nil && !has
		return owned && onThisNode(ts, pv) && change
	}},
}

// libraryShouldDelete is the library v8's ProvisionController.shouldDelete
// with AddFinalizer(true), past the Provisioner's ShouldDelete:
// provisionerName is the driver's name.
func libraryShouldDelete(ts testScope, pv *v1.PersistentVolume) bool {
	if !slices.Contains(pv.Finalizers, libFinalizer) && pv.DeletionTimestamp != nil {
		return false // the finalizer was removed: the volume is deleted
	}
	if pv.Status.Phase != v1.VolumeReleased || pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		return false
	}
	if !metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned) {
		return false
	}
	return pv.Annotations[storagehelpers.AnnDynamicallyProvisioned] == ts.s.Driver ||
		pv.Annotations[storagehelpers.AnnMigratedTo] == ts.s.Driver
}

// tetherShouldDelete is what Provisioner.ShouldDelete reads of a PV: not
// released for a lost node, a CSI PV of the driver (an in-tree PV migrated
// to it counts, as its translation would be the driver's), and in
// node-deployment mode one whose node affinity this node meets.
func tetherShouldDelete(ts testScope, pv *v1.PersistentVolume) bool {
	if nodeloss.Released(pv) {
		return false
	}
	ours := pv.Spec.CSI != nil && pv.Spec.CSI.Driver == ts.s.Driver ||
		pv.Spec.CSI == nil && ts.s.Migrated != "" && pv.Annotations[storagehelpers.AnnMigratedTo] == ts.s.Driver
	return ours && onThisNode(ts, pv)
}

// onThisNode is Provisioner.onOwnNode: in node-deployment mode, a PV with
// a node affinity that the node's labels meet; every PV otherwise.
func onThisNode(ts testScope, pv *v1.PersistentVolume) bool {
	return ts.s.Node == "" || pv.Spec.NodeAffinity != nil && storagehelpers.CheckNodeAffinity(pv, ts.labels) == nil
}

// claimReader is one reader of the claim cache: whether it acts on c (or,
// for the protections, reads it as a clone or restore in progress), with r
// to draw what else its decision reads.
type claimReader struct {
	name string
	acts func(ts testScope, c *v1.PersistentVolumeClaim, r *rand.Rand) bool
}

var claimReaders = []claimReader{
	// The library v8's shouldProvision, past the Provisioner's
	// ShouldProvision (forDriver; in node-deployment mode a claim selected
	// for this node, or for none yet, which it may give to this node).
	{"library shouldProvision", func(ts testScope, c *v1.PersistentVolumeClaim, _ *rand.Rand) bool {
		if c.Spec.VolumeName != "" || c.DeletionTimestamp != nil {
			return false
		}
		provisioner, ok := c.Annotations[storagehelpers.AnnStorageProvisioner]
		if !ok {
			provisioner = c.Annotations[annSPBeta]
		}
		known := provisioner == ts.s.Driver || ts.s.Migrated != "" && provisioner == ts.s.Migrated
		forDriver := provisioner == ts.s.Driver || c.Annotations[storagehelpers.AnnMigratedTo] == ts.s.Driver
		selected := c.Annotations[storagehelpers.AnnSelectedNode]
		return known && forDriver && (ts.s.Node == "" || selected == "" || selected == ts.s.Node)
	}},
	// The in-flight reconciler (InFlight.Reconcile) on a claim that holds
	// the record: records.Decide, on an input drawn around the claim.
	{"records.Decide", func(ts testScope, c *v1.PersistentVolumeClaim, r *rand.Rand) bool {
		return inflight.Holds(c) && records.Decide(recordInput(ts, c, r)).Op != records.Keep
	}},
	// The clone protection's release (protect.CloneProtection.Reconcile)
	// reads the source claim from the cache and removes its finalizer.
	{"clone protection release", func(_ testScope, c *v1.PersistentVolumeClaim, _ *rand.Rand) bool {
		return slices.Contains(c.Finalizers, protect.FinalizerCloneSource)
	}},
	// The clone and snapshot protections read their sources' clones and
	// restores from the cache; one in progress keeps its source. A live
	// unbound claim without a record that the cache does not hold is
	// found by the read of the namespace's claims from the API server
	// before a release (usedOnServer), so it is left out here.
	{"clone in progress", func(_ testScope, c *v1.PersistentVolumeClaim, _ *rand.Rand) bool {
		src := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: genNS, Name: "src", UID: "src-uid"}}
		busy, _ := protect.CloneInProgress(src, []*v1.PersistentVolumeClaim{c})
		return busy && !liveUnboundWithoutRecord(c)
	}},
	{"restore in progress", func(_ testScope, c *v1.PersistentVolumeClaim, _ *rand.Rand) bool {
		snap := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: genNS, Name: "snap"}}
		busy, _ := protect.RestoreInProgress(snap, []*v1.PersistentVolumeClaim{c})
		return busy && !liveUnboundWithoutRecord(c)
	}},
	// The orphan sweep's accounting reads the volume a claim's record
	// names from the claim itself (Seen holds only the volume name of the
	// claim's UID).
	{"sweep accounts the record's volume", func(_ testScope, c *v1.PersistentVolumeClaim, _ *rand.Rand) bool {
		_, _, ok := inflight.Volume(c)
		return ok
	}},
}

func liveUnboundWithoutRecord(c *v1.PersistentVolumeClaim) bool {
	return c.DeletionTimestamp == nil && c.Spec.VolumeName == "" && !inflight.Holds(c)
}

// recordInput draws what records.Decide reads besides the claim: the PV
// of the record's volume (none, this claim's, another claim's), the
// process's notes, the owner and the node's loss.
func recordInput(ts testScope, c *v1.PersistentVolumeClaim, r *rand.Rand) records.Input {
	in := records.Input{Claim: c, Volume: records.Volume(c, genPrefix, 0), Now: genNow,
		NoneMade: r.IntN(4) == 0, HandBack: r.IntN(6) == 0}
	if r.IntN(3) == 0 {
		in.HandedOff = genNow.Add(-time.Duration(r.IntN(3)) * time.Minute)
	}
	in.Owner, in.Moved = records.OwnerOf(c, ts.s.Node)
	in.NodeGone = r.IntN(3) == 0
	if !in.NodeGone && r.IntN(2) == 0 {
		in.NodeWait = time.Minute
	}
	switch r.IntN(3) {
	case 1, 2:
		pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: in.Volume, ResourceVersion: "1",
			CreationTimestamp: metav1.Time{Time: genNow.Add(-time.Duration(r.IntN(4)) * time.Minute)}}}
		uid := c.UID
		if r.IntN(3) == 0 {
			uid = "another-claim"
		}
		pv.Spec.ClaimRef = &v1.ObjectReference{Namespace: c.Namespace, Name: c.Name, UID: uid}
		in.PV = pv
	}
	return in
}
