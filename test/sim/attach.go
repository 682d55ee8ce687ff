package sim

import (
	"fmt"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VolumeAttachments: the attach/detach controller attaches PVs of the
// driver to nodes (a pod uses the claim; the CSIDriver leaves
// attachRequired at its default) and detaches them later, whether or not
// the driver has PUBLISH_UNPUBLISH_VOLUME (Config.Attach). With it, tether
// deletes a PV's volume only once no VolumeAttachment names the PV, and
// the last detach hands the PV back to the library (Provisioner.WatchDetach);
// without it, attachments do not hold a deletion, as in
// external-provisioner. Once the actors stop, every volume is detached
// (repair), and a Released Delete PV that was ever attached must then go
// without a restart of the provisioner.

// drawAttach draws Config.Attach from a hash of the seed, not from the
// random stream, so the rest of the configuration stays what it was.
func drawAttach(seed int64) bool {
	h := fnv.New32a()
	fmt.Fprintf(h, "attach/%d", seed)
	return h.Sum32()%2 == 0
}

// attachable lists the PVs of the driver not being deleted.
func (w *World) attachable() []*v1.PersistentVolume {
	var pvs []*v1.PersistentVolume
	for _, pv := range w.api.volumes() {
		if pv.DeletionTimestamp == nil && pv.Spec.CSI != nil && pv.Spec.CSI.Driver == driverName {
			pvs = append(pvs, pv)
		}
	}
	return pvs
}

// adminAttach is the attach/detach controller attaching a PV of the
// driver, not being deleted, to a node.
func (w *World) adminAttach() string {
	return w.attach(pick(w, w.attachable()), pick(w, nodeNames))
}

func (w *World) attach(pv *v1.PersistentVolume, node string) string {
	name := fmt.Sprintf("csi-%s-%s", pv.Name, node)
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: driverName, NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv.Name}}}
	if _, err := w.api.Create(va); err != nil {
		return "attach/detach controller: attach: " + err.Error()
	}
	w.attached[pv.Name] = true
	return fmt.Sprintf("attach/detach controller: attach %s to %s", pv.Name, node)
}

// adminDetach detaches one attached volume.
func (w *World) adminDetach() string {
	keys := w.api.keys(rVAs)
	if len(keys) == 0 {
		return "attach/detach controller: nothing attached"
	}
	name := pick(w, keys)
	_ = w.api.Delete(rVAs, "", name, nil)
	return "attach/detach controller: detach " + name
}

// detachable lists the VolumeAttachments whose PV is no longer Bound (or
// is gone): its claim is deleted, so its pods are, and the attach/detach
// controller detaches it in its own time.
func (w *World) detachable() []string {
	var out []string
	for _, k := range w.api.keys(rVAs) {
		va := w.api.peek(rVAs, k).(*storagev1.VolumeAttachment)
		pv, _ := w.api.peek(rVolumes, *va.Spec.Source.PersistentVolumeName).(*v1.PersistentVolume)
		if pv == nil || pv.Status.Phase != v1.VolumeBound || pv.DeletionTimestamp != nil {
			out = append(out, k)
		}
	}
	return out
}

// controllerDetach detaches a volume whose claim is gone.
func (w *World) controllerDetach() string {
	name := pick(w, w.detachable())
	_ = w.api.Delete(rVAs, "", name, nil)
	return "attach/detach controller: detach " + name + " (its claim is gone)"
}

// attachBound attaches about half the Bound PVs of the driver, before the
// tear-down deletes their claims (their pods used them).
func (w *World) attachBound() {
	for _, pv := range w.attachable() {
		if pv.Status.Phase == v1.VolumeBound && w.rng.Intn(2) == 0 {
			w.tracef("%s", w.attach(pv, pick(w, nodeNames)))
		}
	}
}

// detachAll detaches every volume (the pods are gone).
func (w *World) detachAll() {
	for _, name := range w.api.keys(rVAs) {
		_ = w.api.Delete(rVAs, "", name, nil)
	}
}

// checkAttached: with PUBLISH_UNPUBLISH_VOLUME, no DeleteVolume (by the
// process whose driver is d) reaches a volume whose PV a VolumeAttachment
// in that process's cache names. (One the cache has not seen yet cannot
// hold it, in tether as in external-provisioner; in a cluster the
// attachment is made before the pod starts, long before its claim goes.)
func (w *World) checkAttached(d *driver, v *backendVolume) {
	if !w.cfg.Attach {
		return
	}
	var vas []any
	for _, p := range w.provs {
		if p.drv == d {
			vas = p.caches.inf[rVAs].indexer.List()
		}
	}
	for _, obj := range vas {
		va := obj.(*storagev1.VolumeAttachment)
		name := va.Spec.Source.PersistentVolumeName
		if name == nil {
			continue
		}
		pv, _ := w.api.peek(rVolumes, *name).(*v1.PersistentVolume)
		if *name == v.Name || pv != nil && pv.Spec.CSI != nil && pv.Spec.CSI.VolumeHandle == v.ID {
			w.violate("%s: DeleteVolume of %s (%s) while VolumeAttachment %s (in its cache) names its PV", w.who, v.ID, v.Name, va.Name)
		}
	}
}

// checkDetachedGone runs once the system settled after the actors
// stopped and every volume was detached, before any process restarts
// (which would re-list every PV): a Released Delete PV that was ever
// attached is gone; one left means a wait for detach that nothing ended.
func (w *World) checkDetachedGone() {
	for _, pv := range w.api.volumes() {
		if w.attached[pv.Name] && pv.Status.Phase == v1.VolumeReleased &&
			pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete {
			w.violate("PV %s (attached once, detached since) is Released with the Delete policy and still there", pv.Name)
		}
	}
}
