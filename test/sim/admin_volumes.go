package sim

import (
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The admin's own volumes and PVs (issue 49): a backend volume the admin
// makes with the storage's tools and a static CSI PV of the driver for it
// with the Delete policy (static-delete-pv), a PV deleted at any phase,
// Bound included (delete-bound-pv), and kube-controller-manager's
// pv-protection, which holds a deleted PV while it is Bound. The checks:
// an admin's volume is tracked by a PV until a Delete PV's reclaim deletes
// it (or a Retain PV keeps it); no PV is saved naming a volume deleted
// before (checkSavedPV).

// pvProtection is the finalizer the API server's admission
// (StorageObjectInUseProtection) puts on every PV it creates; KCM's
// pv-protection controller removes it from a PV being deleted once the PV
// is not Bound.
const pvProtection = "kubernetes.io/pv-protection"

// adminState is the simulator's memory of the admin's moves of this file,
// of twin.go and of refuse_pv.go.
type adminState struct {
	// disks numbers the admin's backend volumes and their PVs.
	disks int
	// refuseUntil: every PV create a component sends fails until then;
	// refuseHow is the answer (a webhook's or etcd's).
	refuseUntil time.Time
	refuseHow   string
	refusals    int
	// refused counts the PV creates refused; boundDeleted the PVs the
	// admin deleted while Bound.
	refused, boundDeleted int
	// saved: the names of the PVs a component saved; resavedDeleted
	// counts the saves of such a name again that named a deleted volume
	// (checkSavedPV).
	saved          map[string]bool
	resavedDeleted int
	// used: the admin's volumes whose PV was ever Bound or Released;
	// ns, the namespace of the claims it was bound to (a clone source of
	// theirs).
	used map[string]bool
	ns   map[string]string
	// seen: the admin's volumes whose PV its provisioner's reclaimer
	// could act on Bound and not being deleted (notePVSeen); unseenLeft,
	// those left on the backend whose PV was deleted before that.
	seen, unseenLeft map[string]bool
	// twinEver: the admin made the hostname twin at some time (twin.go);
	// twinLosses counts the steps at which node-1 was lost on the API
	// while the binder knew both and a PV pinned by the shared value was
	// bound to a claim that still uses it.
	twinEver   bool
	twinLosses int
}

// admitPV is the admission of a PV's create: pv-protection's finalizer.
func admitPV(pv *v1.PersistentVolume) {
	if !slices.Contains(pv.Finalizers, pvProtection) {
		pv.Finalizers = append(pv.Finalizers, pvProtection)
	}
}

// pvProtectable are the PVs being deleted whose pv-protection finalizer
// KCM's controller may remove: those not Bound.
func (w *World) pvProtectable() []string {
	var out []string
	for _, pv := range w.api.volumes() {
		if pv.DeletionTimestamp != nil && pv.Status.Phase != v1.VolumeBound && slices.Contains(pv.Finalizers, pvProtection) {
			out = append(out, pv.Name)
		}
	}
	return out
}

// pvProtectionController is KCM's pv-protection controller at work on one
// PV: its finalizer goes (and the PV with it, if it was the last).
func (w *World) pvProtectionController() string {
	name := pick(w, w.pvProtectable())
	pv := w.api.Get(rVolumes, "", name).(*v1.PersistentVolume)
	pv.Finalizers = slices.DeleteFunc(pv.Finalizers, func(f string) bool { return f == pvProtection })
	if _, err := w.api.Update(pv, false); err != nil {
		return "pv-protection: " + err.Error()
	}
	return fmt.Sprintf("pv-protection: PV %s (%s) is no longer in use: finalizer removed (left %v)", name, pv.Status.Phase, pv.Finalizers)
}

// adminStaticDeletePV makes a backend volume as an admin would with the
// storage's own tools (on a node, in node mode) and a static CSI PV of
// the driver for it, with the Delete policy and no provisioned-by
// annotation: pre-bound to a pending claim, or Available for the binder
// to match with a claim of its class.
func (w *World) adminStaticDeletePV() string {
	w.adm.disks++
	name := fmt.Sprintf("disk-%d", w.adm.disks)
	vol := &backendVolume{Name: name, Request: "cap=5368709120", Admin: true, Context: map[string]string{}}
	if w.cfg.Node {
		vol.Node = pick(w, nodeNames)
	}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "static-delete-" + fmt.Sprint(w.adm.disks)},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("5Gi")},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			StorageClassName:              pick(w, []string{classImmediate, classWFFC, classSecret, classRetain})}}
	bound := ""
	if cs := w.liveClaims(func(c *v1.PersistentVolumeClaim) bool { return c.Spec.VolumeName == "" }); len(cs) > 0 && w.rng.Intn(2) == 0 {
		c := pick(w, cs)
		pv.Spec.StorageClassName = *c.Spec.StorageClassName
		pv.Spec.ClaimRef = &v1.ObjectReference{Namespace: c.Namespace, Name: c.Name}
		pv.Spec.VolumeAttributesClassName = c.Spec.VolumeAttributesClassName
		pv.Spec.VolumeMode = c.Spec.VolumeMode
		bound = fmt.Sprintf(", pre-bound to %s/%s", c.Namespace, c.Name)
	}
	w.back.make(vol.Node+"/"+name, vol)
	pv.Spec.CSI = &v1.CSIPersistentVolumeSource{Driver: driverName, VolumeHandle: vol.ID}
	if vol.Node != "" {
		pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: topologyKey, Operator: v1.NodeSelectorOpIn, Values: []string{vol.Node}}}}}}}
	}
	if _, err := w.api.Create(pv); err != nil {
		// Its PV refused, the admin deletes the volume again.
		vol.Deleted = true
		delete(w.back.byName, vol.Node+"/"+name)
		return "admin: static Delete PV: " + err.Error()
	}
	return fmt.Sprintf("admin: make volume %s (%s) on %q and static Delete PV %s of class %s for it%s", vol.ID, name, vol.Node,
		pv.Name, pv.Spec.StorageClassName, bound)
}

// adminDeleteBoundPV is `kubectl delete pv` of a PV at any phase, Bound
// included: pv-protection holds a Bound PV until its claim goes. Left out:
// a PV not Released whose claimRef's claim (with its UID) is gone or not
// bound to it (FINDINGS.md, issue 49): once that claim is deleted, only
// the binder's resync (not modelled) would look at the PV again.
func (w *World) adminDeleteBoundPV() string {
	var pvs, bound []*v1.PersistentVolume
	for _, pv := range w.api.volumes() {
		if pv.DeletionTimestamp != nil || w.halfBound(pv) {
			continue
		}
		pvs = append(pvs, pv)
		if pv.Status.Phase == v1.VolumeBound {
			bound = append(bound, pv)
		}
	}
	if len(pvs) == 0 {
		return "admin: no PV to delete"
	}
	if len(bound) > 0 && w.rng.Intn(2) == 0 {
		pvs = bound // mostly a Bound one, the case pv-protection holds
	}
	pv := pick(w, pvs)
	if pv.Status.Phase == v1.VolumeBound {
		w.adm.boundDeleted++
	}
	_ = w.api.Delete(rVolumes, "", pv.Name, nil)
	return fmt.Sprintf("admin: delete PV %s (%s, %s, finalizers %v)", pv.Name, pv.Status.Phase, pv.Spec.PersistentVolumeReclaimPolicy, pv.Finalizers)
}

// halfBound reports whether a PV not Released has a claimRef with a UID
// whose claim is gone or not bound to the PV.
func (w *World) halfBound(pv *v1.PersistentVolume) bool {
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "" || pv.Status.Phase == v1.VolumeReleased {
		return false
	}
	c := w.claimOfRef(pv)
	return c == nil || c.Spec.VolumeName != pv.Name
}

// checkAdminVolumes: an admin's volume is tracked by the PV the admin
// made for it while that PV exists. A Delete PV that goes away takes its
// volume with it, static or provisioned: once a PV that was ever bound
// (Bound or Released) is gone, its volume was deleted (the Delete
// policy's reclaim) or kept (a Retain PV named it), or the PV's claim was
// released for node loss (the volume stays on the lost node's disk). A PV
// deleted before any claim used it leaves its volume to the admin, and
// so, for now, does one deleted while Bound before its provisioner's
// reclaimer could act on it Bound (counted: FINDINGS.md, issue 49).
func (w *World) checkAdminVolumes(pvsByHandle map[string]int) {
	for _, pv := range w.api.volumes() {
		if pv.Spec.CSI != nil && (pv.Status.Phase == v1.VolumeBound || pv.Status.Phase == v1.VolumeReleased) {
			w.adm.used[pv.Spec.CSI.VolumeHandle] = true
			if pv.Status.Phase == v1.VolumeBound && pv.Spec.ClaimRef != nil {
				w.adm.ns[pv.Spec.CSI.VolumeHandle] = pv.Spec.ClaimRef.Namespace
			}
		}
	}
	for _, id := range sortedKeys(w.back.vols) {
		v := w.back.vols[id]
		if !v.Admin || v.Deleted || pvsByHandle[v.ID] > 0 || w.api.retained[v.ID] || !w.adm.used[v.ID] || w.releasedVolume(v) {
			continue
		}
		if !w.adm.seen[v.ID] {
			w.adm.unseenLeft[v.ID] = true // its reclaimer never had the chance
			continue
		}
		w.violate("volume %s (%s), the admin's, is left on the backend: its static Delete PV was bound and is gone without a DeleteVolume",
			v.ID, v.Name)
	}
}

// notePVSeen: a provisioner process's reclaimer works a PV (its cache's
// copy), or its informer is handed one it drops (its scope does not keep
// it whole: the reclaimer never sees it). The admin's static PV, Bound
// and not being deleted, is then one whose reclaimer could have given it
// the deletion finalizer (or would have, had the cache kept it).
func (w *World) notePVSeen(c *caches, obj runtime.Object) {
	pv, ok := obj.(*v1.PersistentVolume)
	if !ok || pv.Spec.CSI == nil || pv.Status.Phase != v1.VolumeBound || pv.DeletionTimestamp != nil {
		return
	}
	v := w.back.vols[pv.Spec.CSI.VolumeHandle]
	if v == nil || !v.Admin {
		return
	}
	for _, p := range w.provs {
		if p != nil && p.caches == c && !p.upstream && p.node == v.Node {
			w.adm.seen[v.ID] = true
		}
	}
}

// namespaceOf is the namespace whose claims a volume is of: its claim's,
// or, for the admin's, that of the claim its PV was last bound to.
func (w *World) namespaceOf(v *backendVolume) string {
	if v.Admin {
		return w.adm.ns[v.ID]
	}
	return w.claimNS[uidOfName(v.Name)]
}

// checkSavedPV: no PV of the driver is saved naming a volume deleted
// before (the library saved it after the volume's clean-up): a PV must
// never name a volume that no longer exists. A volume that went with its
// node is not a deletion. A PV saved again under a name saved before (the
// library retrying a create that was applied but answered an error, after
// the PV's whole life) is counted, and checked only with
// -with=resaved-pv (faults.go, FINDINGS.md).
func (w *World) checkSavedPV(who string, pv *v1.PersistentVolume) {
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driverName {
		return
	}
	resaved := w.adm.saved[pv.Name]
	w.adm.saved[pv.Name] = true
	if v := w.back.vols[pv.Spec.CSI.VolumeHandle]; v != nil && v.Deleted && !v.Gone {
		if resaved && !With["resaved-pv"] {
			w.adm.resavedDeleted++
			return
		}
		w.violate("%s saved PV %s naming volume %s (%s), which was deleted before: a PV names a volume that no longer exists",
			who, pv.Name, v.ID, v.Name)
	}
}

// adminCounts adds this file's figures to a schedule's counts.
func (w *World) adminCounts(c map[string]int) {
	deleted := 0
	for _, v := range w.back.vols {
		if v.Admin && v.Deleted && !v.Gone {
			deleted++
		}
	}
	c["admin's volumes of static Delete PVs"] = w.adm.disks
	c["admin's volumes deleted"] = deleted
	c["PVs deleted while Bound"] = w.adm.boundDeleted
	c["admin's volumes left, their PV deleted Bound before its reclaimer could act"] = len(w.adm.unseenLeft)
	c["PV refusals"] = w.adm.refusals
	c["steps node-1 was lost with its hostname twin and a claim of a PV pinned by the shared value"] = w.adm.twinLosses
	c["PV creates refused"] = w.adm.refused
	c["PVs saved again after their life, naming their deleted volume"] = w.adm.resavedDeleted
}

// deleteBoundAtRest: in one schedule in three (from a hash of the seed),
// once the system settled, the admin deletes a Bound PV, one of the
// admin's static Delete PVs if any is Bound: pv-protection holds it, and
// the tear-down then deletes its claim.
func (w *World) deleteBoundAtRest() {
	h := fnv.New32a()
	fmt.Fprintf(h, "delete-bound-at-rest/%d", w.seed)
	if Disabled["delete-bound-pv"] || w.only != nil && !w.only["delete-bound-pv"] || h.Sum32()%3 != 0 {
		return
	}
	var static, bound []*v1.PersistentVolume
	for _, pv := range w.api.volumes() {
		if pv.Status.Phase != v1.VolumeBound || pv.DeletionTimestamp != nil || w.halfBound(pv) {
			continue
		}
		bound = append(bound, pv)
		if pv.Spec.CSI != nil && w.back.vols[pv.Spec.CSI.VolumeHandle] != nil && w.back.vols[pv.Spec.CSI.VolumeHandle].Admin {
			static = append(static, pv)
		}
	}
	if len(static) > 0 {
		bound = static
	}
	if len(bound) == 0 {
		return
	}
	pv := pick(w, bound)
	w.offered["delete-bound-pv"] = true
	w.adm.boundDeleted++
	_ = w.api.Delete(rVolumes, "", pv.Name, nil)
	w.tracef("---- admin: delete Bound PV %s (%s, finalizers %v)", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy, pv.Finalizers)
	w.settle(0)
}
