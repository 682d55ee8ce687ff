package sim

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/nodeloss"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// adminEditPVMeta edits what an admin may write on a PV's metadata that
// decides its deletion: pv.kubernetes.io/provisioned-by removed or
// another driver's (only with pv-disowned in With: the PV is no longer
// the provisioner's, which then never deletes a Released Delete one nor
// lets its deletion finalizer go, as external-provisioner; the promise's
// "nothing stuck" fails, seeds 88, 219, 288, 348, 360 and 401 of the
// run that added this move), the deletion secret's keys removed or naming a
// secret that is not there, a node-loss mark removed, or the deletion
// finalizer stripped. A Retain PV's finalizer may be stripped and the PV
// deleted at once: docs/design.md (in-flight record, step 2) says that
// this is not covered when the PV's claim still holds its record (the
// claim's deletion then cleans up the disk), so the disk is no longer
// taken as kept then.
func (w *World) adminEditPVMeta() string {
	var pvs []*v1.PersistentVolume
	for _, pv := range w.api.volumes() {
		if pv.DeletionTimestamp == nil {
			pvs = append(pvs, pv)
		}
	}
	if len(pvs) == 0 {
		return "admin: no PV to edit"
	}
	pv := pick(w, pvs).DeepCopy()
	whats := []string{"deletion-secret", "node-loss-mark", "finalizer"}
	if With["pv-disowned"] {
		whats = append(whats, "provisioned-by")
	}
	what := pick(w, whats)
	if pv.Annotations == nil {
		pv.Annotations = map[string]string{}
	}
	to := ""
	switch what {
	case "provisioned-by":
		to = pick(w, []string{"", otherDriver})
		delete(pv.Annotations, storagehelpers.AnnDynamicallyProvisioned)
		if to != "" {
			pv.Annotations[storagehelpers.AnnDynamicallyProvisioned] = to
		}
	case "deletion-secret":
		to = pick(w, []string{"", "gone-secret"})
		delete(pv.Annotations, request.AnnDeletionSecretName)
		delete(pv.Annotations, request.AnnDeletionSecretNamespace)
		if to != "" {
			pv.Annotations[request.AnnDeletionSecretName] = to
			pv.Annotations[request.AnnDeletionSecretNamespace] = "ns-1"
		}
	case "node-loss-mark":
		var marks []string
		for k := range pv.Annotations {
			if strings.HasPrefix(k, "tether.dev/") && k != nodeloss.AnnPolicy {
				marks = append(marks, k)
			}
		}
		if len(marks) == 0 {
			return "admin: PV " + pv.Name + " carries no node-loss mark"
		}
		slices.Sort(marks)
		to = pick(w, marks)
		delete(pv.Annotations, to)
		to = "without " + to
	case "finalizer":
		if !slices.Contains(pv.Finalizers, finalizerPV) {
			return "admin: PV " + pv.Name + " has no deletion finalizer to strip"
		}
		pv.Finalizers = slices.DeleteFunc(pv.Finalizers, func(f string) bool { return f == finalizerPV })
		to = "stripped"
	}
	if _, err := w.api.Update(pv, false); err != nil {
		return fmt.Sprintf("admin: %s of PV %s %q: %v", what, pv.Name, to, err)
	}
	out := fmt.Sprintf("admin: %s of PV %s %q by hand", what, pv.Name, to)
	w.gapCounted("PV metadata edited")
	if what != "finalizer" || pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimRetain || w.rng.Intn(2) == 0 {
		return out
	}
	_ = w.api.Delete(rVolumes, "", pv.Name, nil)
	out += ", and deletes it"
	if ref := pv.Spec.ClaimRef; ref != nil {
		if c, ok := w.api.peek(rClaims, objKey(ref.Namespace, ref.Name)).(*v1.PersistentVolumeClaim); ok && c.UID == ref.UID && inflight.Holds(c) {
			// docs/design.md: not covered; the disk is not kept.
			delete(w.api.retained, pv.Name)
			if pv.Spec.CSI != nil {
				delete(w.api.retained, pv.Spec.CSI.VolumeHandle)
			}
			w.gapCounted("PVs stripped and deleted while their claim holds its record")
			out += " while claim " + ref.Namespace + "/" + ref.Name + " holds its record (not covered, design.md)"
		}
	}
	return out
}

// tenantDeleteSecret deletes the provisioner secret of a live namespace,
// or makes it again (the tenant reading the events); repair makes every
// one again once the actors stop.
func (w *World) tenantDeleteSecret() string {
	nss := w.liveNamespaces()
	if len(nss) == 0 {
		return "tenant: no namespace"
	}
	ns := pick(w, nss)
	if w.api.peek(rSecrets, objKey(ns, secretName)) == nil {
		w.makeSecret(ns)
		return "tenant: make secret " + ns + "/" + secretName + " again"
	}
	_ = w.api.Delete(rSecrets, ns, secretName, nil)
	w.gapCounted("secrets deleted")
	return "tenant: delete secret " + ns + "/" + secretName
}

// makeSecret makes a namespace's provisioner secret.
func (w *World) makeSecret(ns string) {
	_, _ = w.api.Create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: ns}, Data: map[string][]byte{"key": []byte("v")}})
}

// repairGaps undoes, once the actors stop, the gap moves that would
// leave claims waiting for ever: the secrets of the live namespaces that
// the tenant deleted are made again, and every class's allowedTopologies
// are cleared.
func (w *World) repairGaps() {
	for _, ns := range w.liveNamespaces() {
		if w.api.peek(rSecrets, objKey(ns, secretName)) == nil {
			w.makeSecret(ns)
		}
	}
	for _, k := range w.api.keys(rClasses) {
		if class, ok := w.api.peek(rClasses, k).(*storagev1.StorageClass); ok && class.AllowedTopologies != nil {
			class = class.DeepCopy()
			class.AllowedTopologies = nil
			_, _ = w.api.Update(class, false)
		}
	}
}

// adminClassTopology sets or clears a class's allowedTopologies, which
// the API lets an admin change on a class in place (ValidateStorageClassUpdate
// checks parameters, provisioner, reclaimPolicy and volumeBindingMode
// only): a node of the driver's topology, a zone, a node that never was,
// or none.
func (w *World) adminClassTopology() string {
	name := pick(w, []string{classImmediate, classWFFC, classSecret, classRetain})
	class, ok := w.api.peek(rClasses, name).(*storagev1.StorageClass)
	if !ok {
		return "admin: no class " + name + " to narrow"
	}
	class = class.DeepCopy()
	key, value := topologyKey, pick(w, []string{"node-1", "node-2", "node-9", "zone-a", ""})
	if strings.HasPrefix(value, "zone-") {
		key = zoneKey
	}
	class.AllowedTopologies = nil
	if value != "" {
		class.AllowedTopologies = []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: key, Values: []string{value}}}}}
	}
	if _, err := w.api.Update(class, false); err != nil {
		return fmt.Sprintf("admin: allowedTopologies %s=%s on class %s: %v", key, value, name, err)
	}
	w.gapCounted("classes' allowedTopologies set")
	return fmt.Sprintf("admin: allowedTopologies of class %s: %s=%q", name, key, value)
}
