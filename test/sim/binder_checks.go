package sim

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// The binder's checks, beyond the promise: KCM's behaviour where defect 8
// of issue 24 broke it.

// annPreResize is the resize controller's note of a volume's size before
// an expansion that is not finished; KCM binds with it as the claim's
// capacity, so that the expansion is taken up again.
const annPreResize = "volume.alpha.kubernetes.io/pre-resize-capacity"

// handedOff reports whether a claim at the API is handed to a provisioner.
func (w *World) handedOff(key string) bool {
	c, ok := w.api.peek(rClaims, key).(*v1.PersistentVolumeClaim)
	return ok && c.Annotations[storagehelpers.AnnStorageProvisioner] != ""
}

// checkHandOff runs when the binder has just handed a claim to a
// provisioner: no PV of the binder's first list that is pre-bound to the
// claim and fits it may still exist, as the binder decides only once its
// handlers have stored and indexed that list.
func (w *World) checkHandOff(key string) {
	c, ok := w.api.peek(rClaims, key).(*v1.PersistentVolumeClaim)
	if !ok {
		return
	}
	for _, name := range w.bind.firstPVs {
		pv, ok := w.api.peek(rVolumes, name).(*v1.PersistentVolume)
		if !ok || !preBoundFits(pv, c) || !w.fitsSelectedNode(pv, c) {
			continue
		}
		w.violate("the binder handed claim %s to the provisioner while PV %s, pre-bound to it and in its first list, waits for it", key, pv.Name)
	}
}

// fitsSelectedNode reports whether a PV's node affinity (a zonal PV's)
// admits the node the scheduler chose for the claim, if any, as the
// binder's node cache shows that node (it may not show it yet).
func (w *World) fitsSelectedNode(pv *v1.PersistentVolume, c *v1.PersistentVolumeClaim) bool {
	name := c.Annotations[storagehelpers.AnnSelectedNode]
	if pv.Spec.NodeAffinity == nil || name == "" {
		return true
	}
	obj, ok, _ := w.bind.caches.inf[rNodes].indexer.GetByKey(name)
	node, isNode := obj.(*v1.Node)
	return ok && isNode && storagehelpers.CheckNodeAffinity(pv, node.Labels) == nil
}

// preBoundFits reports whether a static PV is pre-bound to a claim and
// fits it, its node affinity aside (fitsSelectedNode).
func preBoundFits(pv *v1.PersistentVolume, c *v1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Namespace != c.Namespace || ref.Name != c.Name || (ref.UID != "" && ref.UID != c.UID) ||
		pv.Annotations[storagehelpers.AnnDynamicallyProvisioned] != "" || pv.DeletionTimestamp != nil {
		return false
	}
	if c.Spec.StorageClassName == nil || pv.Spec.StorageClassName != *c.Spec.StorageClassName {
		return false
	}
	if vac := c.Spec.VolumeAttributesClassName; (vac == nil) != (pv.Spec.VolumeAttributesClassName == nil) ||
		vac != nil && *vac != *pv.Spec.VolumeAttributesClassName {
		return false
	}
	if volumeModeOf(c.Spec.VolumeMode) != volumeModeOf(pv.Spec.VolumeMode) {
		return false
	}
	want, have := c.Spec.Resources.Requests[v1.ResourceStorage], pv.Spec.Capacity[v1.ResourceStorage]
	return have.Cmp(want) >= 0
}

// volumeModeOf is a claim's or PV's volume mode, Filesystem when unset.
func volumeModeOf(m *v1.PersistentVolumeMode) v1.PersistentVolumeMode {
	if m == nil {
		return v1.PersistentVolumeFilesystem
	}
	return *m
}

// checkCapacities: a claim bound to a PV that carries the pre-resize
// capacity has that capacity in its status, as KCM writes it.
func (w *World) checkCapacities() {
	for _, c := range w.api.claims() {
		if c.Status.Phase != v1.ClaimBound || c.Spec.VolumeName == "" {
			continue
		}
		pv, ok := w.api.peek(rVolumes, c.Spec.VolumeName).(*v1.PersistentVolume)
		if !ok || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != c.UID {
			continue
		}
		pre, ok := pv.Annotations[annPreResize]
		if !ok {
			continue
		}
		want, err := resource.ParseQuantity(pre)
		if err != nil {
			continue
		}
		if got := c.Status.Capacity[v1.ResourceStorage]; got.Cmp(want) != 0 {
			w.violate("claim %s/%s is bound to %s with capacity %s, not its pre-resize capacity %s", c.Namespace, c.Name, pv.Name, got.String(), pre)
		}
	}
}
