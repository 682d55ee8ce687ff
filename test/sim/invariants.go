package sim

import (
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	"github.com/tether-csi/tether/pkg/provisioner/sweep"
)

// ownName is the volume name tether derives from a claim's UID.
func ownName(c *v1.PersistentVolumeClaim) string {
	return request.VolumeName(prefix, string(c.UID), -1)
}

// uidOfName is the claim UID in one of our volume names.
func uidOfName(name string) string { return strings.TrimPrefix(name, prefix+"-") }

// checkCreate: a clean-up repeats only the CreateVolume of its own claim,
// and a clone never copies a volume of another namespace.
func (w *World) checkCreate(d *driver, req *csi.CreateVolumeRequest) {
	c := w.cleanup
	if c == nil {
		return
	}
	if req.GetName() != ownName(c) {
		w.violate("the clean-up of claim %s/%s asked CreateVolume for %s, not its own volume %s", c.Namespace, c.Name, req.GetName(), ownName(c))
	}
	if src := req.GetVolumeContentSource().GetVolume().GetVolumeId(); src != "" {
		v := w.back.vols[src]
		if v == nil || v.Other || w.namespaceOf(v) != c.Namespace {
			w.violate("the clean-up of claim %s/%s clones volume %s, not of its namespace", c.Namespace, c.Name, src)
		}
	}
}

// checkDelete: no DeleteVolume reaches a volume another cluster made, that
// a PV names (but the Released one being deleted), that a Retain PV ever
// named, that a live claim owns, or that the claim being cleaned up did
// not own.
func (w *World) checkDelete(v *backendVolume) {
	w.checkCloneSource(v)
	if v.Other {
		w.violate("%s: DeleteVolume of %s (%s), made by another cluster", w.who, v.ID, v.Name)
		return
	}
	if w.api.retained[v.ID] || w.api.retained[v.Name] {
		w.violate("%s: DeleteVolume of %s (%s), which a Retain PV named", w.who, v.ID, v.Name)
	}
	if w.releasedPV(v) {
		w.violate("%s: DeleteVolume of %s (%s), whose claim was released for node loss", w.who, v.ID, v.Name)
	}
	for _, pv := range w.api.volumes() {
		if pv.Name == w.deleting {
			continue
		}
		if pv.Name == v.Name || pv.Spec.CSI != nil && pv.Spec.CSI.Driver == driverName && pv.Spec.CSI.VolumeHandle == v.ID {
			w.violate("%s: DeleteVolume of %s (%s), which PV %s names", w.who, v.ID, v.Name, pv.Name)
		}
	}
	uid := uidOfName(v.Name)
	for _, c := range w.api.claims() {
		// The library deletes a Released PV's volume whatever its claim
		// does (a claim bound to another volume releases its own PV).
		// The clean-up deletes a living claim's own volume only when the
		// claim is bound to another one for good (spec.volumeName is set
		// once).
		// In node mode the record's node cleans up its local volume once
		// the claim moved to another node (or to none).
		unused := c.Spec.VolumeName != "" && c.Spec.VolumeName != v.Name ||
			w.cfg.Node && c.Annotations[storagehelpers.AnnSelectedNode] != v.Node
		if string(c.UID) == uid && c.DeletionTimestamp == nil && w.deleting == "" && !unused {
			w.violate("%s: DeleteVolume of %s (%s), the volume of live claim %s/%s", w.who, v.ID, v.Name, c.Namespace, c.Name)
		}
	}
	if c := w.cleanup; c != nil && v.Name != ownName(c) {
		w.violate("the clean-up of claim %s/%s deleted %s (%s), not its own volume", c.Namespace, c.Name, v.ID, v.Name)
	}
}

// checkStep runs after every step: every volume this cluster made is
// tracked (by one PV, or by a record) or deleted; no PV is named by two
// bound claims; no claim is Lost while its PV is bound to it.
func (w *World) checkStep() {
	w.checkTracker()
	w.checkCapacities()
	w.checkCloneSources()
	w.checkRestoreSources()
	pvsByHandle := map[string]int{}
	pvNames := map[string]bool{}
	for _, pv := range w.api.volumes() {
		pvNames[pv.Name] = true
		if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == driverName {
			pvsByHandle[pv.Spec.CSI.VolumeHandle]++
		}
	}
	records := map[string]int{}
	boundTo := map[string]string{}
	for _, c := range w.api.claims() {
		// A record stands for the volume named after its claim's UID
		// (what it names is the claim's user's to write).
		// In node mode it stands for the volume on its node (see
		// recordNode); otherwise for the shared one.
		if drv := c.Annotations[inflight.AnnDriver]; inflight.Holds(c) && (drv == "" || drv == driverName) {
			node := ""
			if w.cfg.Node {
				node = recordNode(c)
			}
			records[node+"/"+ownName(c)]++
		}
		if c.Status.Phase == v1.ClaimBound && c.Spec.VolumeName != "" {
			if other, ok := boundTo[c.Spec.VolumeName]; ok {
				w.violate("claims %s and %s/%s are both bound to %s", other, c.Namespace, c.Name, c.Spec.VolumeName)
			}
			boundTo[c.Spec.VolumeName] = c.Namespace + "/" + c.Name
		}
		if c.Status.Phase == v1.ClaimLost && c.Spec.VolumeName != "" {
			if pv, ok := w.api.peek(rVolumes, c.Spec.VolumeName).(*v1.PersistentVolume); ok && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == c.UID {
				w.violate("claim %s/%s is Lost while its PV %s is bound to it", c.Namespace, c.Name, pv.Name)
			}
		}
	}
	w.checkAdminVolumes(pvsByHandle)
	w.noteTwinLoss()
	for _, id := range sortedKeys(w.back.vols) {
		v := w.back.vols[id]
		if v.Deleted || v.Other || v.Admin {
			continue // the admin's: checkAdminVolumes
		}
		n := pvsByHandle[v.ID]
		if n > 1 {
			w.violate("volume %s (%s) is named by %d PVs", v.ID, v.Name, n)
		}
		if n > 0 || records[v.Node+"/"+v.Name] > 0 || w.exempt(v) {
			continue
		}
		if w.cfg.Node {
			w.violate("volume %s (%s) on %s is tracked by no PV and no in-flight record for its node%s%s", v.ID, v.Name, v.Node, w.recordHint(v.Name), w.leakHint(v))
			continue
		}
		w.violate("volume %s (%s) is tracked by no PV and no in-flight record%s", v.ID, v.Name, w.leakHint(v))
	}
}

// leakHint says what may have dropped a volume's tracking: an
// AlreadyExists answer, or the library's unsaved PV in the cache.
func (w *World) leakHint(v *backendVolume) string {
	var hints []string
	if w.back.alreadyExists[v.Name] {
		hints = append(hints, "after CreateVolume answered AlreadyExists")
	}
	for _, p := range w.provs {
		if obj, ok, _ := p.caches.inf[rVolumes].indexer.GetByKey(v.Name); ok && obj.(*v1.PersistentVolume).ResourceVersion == "" {
			hints = append(hints, "the library's unsaved PV is in the cache")
		}
		if p.lib.unsaved[v.Name] != nil {
			hints = append(hints, "the library retries its PV in memory")
		}
	}
	if len(hints) == 0 {
		return ""
	}
	return " (" + strings.Join(hints, "; ") + ")"
}

// exempt: volumes an admin keeps (a Retain PV named them), volumes whose
// record the tenant removed itself (only the sweep can find those, checked
// at the end), volumes reported abandoned, and volumes external-provisioner
// made (its leaks are its own).
func (w *World) exempt(v *backendVolume) bool {
	return w.api.retained[v.ID] || w.api.retained[v.Name] || w.stripped[v.Name] || w.abandoned(v) || v.Upstream ||
		w.releasedVolume(v)
}

// checkEnd runs at quiescence after the tear-down: nothing is left
// Terminating, and every volume of this cluster not kept by an admin is
// deleted, or reported.
func (w *World) checkEnd() {
	for _, c := range w.api.claims() {
		if c.DeletionTimestamp != nil {
			w.violate("claim %s/%s is stuck Terminating (finalizers %v)", c.Namespace, c.Name, c.Finalizers)
		}
	}
	for _, pv := range w.api.volumes() {
		if pv.DeletionTimestamp != nil {
			w.violate("PV %s is stuck Terminating (finalizers %v)", pv.Name, pv.Finalizers)
		}
	}
	for _, ns := range w.terminating() {
		w.violate("namespace %s is stuck Terminating", ns)
	}
	w.checkDetachedGone()
	w.checkSnapshotsEnd()
	w.checkCaughtUp()
	for _, id := range sortedKeys(w.back.vols) {
		v := w.back.vols[id]
		if v.Deleted || v.Other || v.Admin || w.api.retained[v.ID] || w.api.retained[v.Name] || w.abandoned(v) {
			continue // the admin's: checkAdminVolumes, at every step
		}
		if w.releasedVolume(v) {
			// Left on its node's disk by a release for node loss: every
			// node is back, and its sweep must have reported it (unless
			// a PV tracks it again: its claim was provisioned there anew).
			if !w.reported(v) && !w.trackedByPV(v) {
				w.violate("volume %s (%s) on %s, released for node loss, is not reported by its node's sweep", v.ID, v.Name, v.Node)
			}
			continue
		}
		// The tenant's own leaks, and external-provisioner's (its
		// volumes made for claims it then lost track of), are found by
		// tether's sweep.
		if (w.stripped[v.Name] || v.Upstream) && w.reported(v) {
			continue
		}
		tracked := false
		for _, pv := range w.api.volumes() {
			if pv.Spec.CSI != nil && pv.Spec.CSI.VolumeHandle == v.ID {
				tracked = true
			}
		}
		if !tracked {
			w.violate("volume %s (%s) leaked: every claim is gone and it is neither deleted nor reported", v.ID, v.Name)
		}
	}
}

// reported: the sweep reported the volume as an orphan.
func (w *World) reported(v *backendVolume) bool {
	for _, e := range w.events {
		if e.reason == sweep.ReasonOrphanVolume && strings.Contains(e.message, v.ID) {
			return true
		}
	}
	return false
}
