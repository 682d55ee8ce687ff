package sim

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

// The checks of node loss (see nodeloss.go), at the writes and events
// that carry its decisions.

// checkBinderWrite checks a write of the binder's against the rules of
// node loss, before it is applied.
func (w *World) checkBinderWrite(verb, res, ns string, action k8stesting.Action) {
	switch {
	case (verb == "update" || verb == "patch") && res == rVolumes && action.GetSubresource() == "":
		cur, next := w.volumeWrite(verb, action)
		if cur == nil || next == nil {
			return
		}
		if next.Annotations[nodeloss.AnnLostNode] != "" && next.Annotations[nodeloss.AnnLostNode] != cur.Annotations[nodeloss.AnnLostNode] &&
			!policyClass(next.Spec.StorageClassName) {
			w.violate("binder: marked PV %s of class %s, which does not release claims on node loss", next.Name, next.Spec.StorageClassName)
		}
		if nodeloss.Released(next) && !nodeloss.Released(cur) {
			w.checkRelease(next)
		}
		if slices.Contains(cur.Finalizers, nodeloss.FinalizerDeletion) && !slices.Contains(next.Finalizers, nodeloss.FinalizerDeletion) {
			if !nodeloss.Released(cur) || w.claimOfRef(cur) != nil {
				w.violate("binder: removed the provisioner's finalizer from PV %s (released %v, claim alive %v)", cur.Name, nodeloss.Released(cur), w.claimOfRef(cur) != nil)
			}
		}
	case verb == "delete" && res == rClaims:
		act := action.(k8stesting.DeleteAction)
		w.checkClaimDelete(ns, act.GetName(), act.GetDeleteOptions().Preconditions)
	case verb == "delete" && res == rVolumes:
		name := action.(k8stesting.DeleteAction).GetName()
		pv, ok := w.api.peek(rVolumes, name).(*v1.PersistentVolume)
		if !ok {
			return
		}
		if !nodeloss.Released(pv) || pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete || w.claimOfRef(pv) != nil {
			w.violate("binder: deleted PV %s (released %v, policy %s, claim alive %v)", name, nodeloss.Released(pv),
				pv.Spec.PersistentVolumeReclaimPolicy, w.claimOfRef(pv) != nil)
			return
		}
		w.loss.released[pv.Name] = true
		w.loss.pvsDeleted++
		if pv.Spec.CSI != nil {
			w.loss.released[pv.Spec.CSI.VolumeHandle] = true
		}
	}
}

// checkRelease: the binder decides a release only for a node lost on the
// API server's word now, and lost for the grace as it saw it.
func (w *World) checkRelease(pv *v1.PersistentVolume) {
	node := pv.Annotations[nodeloss.AnnLostNode]
	if !w.lostOnAPI(node) {
		w.violate("binder: released the claim of PV %s while node %s is not lost", pv.Name, node)
		return
	}
	since, ok := w.loss.seen["binder"][node]
	if !ok || w.now.Sub(since) < simGrace {
		w.violate("binder: released the claim of PV %s, node %s lost for %s as the binder saw it (seen %v), grace %s",
			pv.Name, node, w.now.Sub(since), ok, simGrace)
	}
	if !policyClass(pv.Spec.StorageClassName) {
		w.violate("binder: released the claim of PV %s of class %s, which does not opt in", pv.Name, pv.Spec.StorageClassName)
	}
}

// checkClaimDelete: the binder deletes only the claim a released PV is
// bound to, by UID, while its node is lost.
func (w *World) checkClaimDelete(ns, name string, pre *metav1.Preconditions) {
	key := ns + "/" + name
	c, ok := w.api.peek(rClaims, key).(*v1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if pre == nil || pre.UID == nil || *pre.UID != c.UID {
		if pre == nil || pre.UID == nil {
			w.violate("binder: deleted claim %s without a UID precondition", key)
		}
		return // the precondition fails: another claim of the name
	}
	pv, ok := w.api.peek(rVolumes, c.Spec.VolumeName).(*v1.PersistentVolume)
	switch {
	case !ok || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != c.UID:
		w.violate("binder: deleted claim %s, bound to no PV that is bound to it", key)
	case !nodeloss.Released(pv):
		w.violate("binder: deleted claim %s before the release of PV %s was decided", key, pv.Name)
	case !w.lostOnAPI(pv.Annotations[nodeloss.AnnLostNode]):
		w.violate("binder: deleted claim %s while node %s is not lost", key, pv.Annotations[nodeloss.AnnLostNode])
	case !policyClass(storagehelpers.GetPersistentVolumeClaimClass(c)):
		w.violate("binder: deleted claim %s of a class without the policy", key)
	}
	if c.DeletionTimestamp == nil {
		w.loss.claims = append(w.loss.claims, c.DeepCopy())
		w.loss.claimsDeleted++
	}
}

// claimOfRef is the claim a PV's claimRef names, with its UID, or nil.
func (w *World) claimOfRef(pv *v1.PersistentVolume) *v1.PersistentVolumeClaim {
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return nil
	}
	c, ok := w.api.peek(rClaims, ref.Namespace+"/"+ref.Name).(*v1.PersistentVolumeClaim)
	if !ok || c.UID != ref.UID {
		return nil
	}
	return c
}

// checkNodeGoneEvent: the in-flight reconciler drops another node's
// record only for a node lost on the API now, for the grace as that
// provisioner saw it.
func (w *World) checkNodeGoneEvent(obj runtime.Object) {
	c, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok {
		return
	}
	node := recordNode(c)
	w.loss.givenUp[node+"/"+ownName(c)] = true
	who := ""
	for _, p := range w.provs {
		if w.who == p.ifQ.name || w.who == "hand-back"+p.suffix() {
			who = p.name
		}
	}
	if !w.lostOnAPI(node) {
		w.violate("%s: dropped the record of %s/%s while its node %s is not lost", w.who, c.Namespace, c.Name, node)
		return
	}
	since, ok := w.loss.seen[who][node]
	if !ok || w.now.Sub(since) < simGrace {
		w.violate("%s: dropped the record of %s/%s, node %s lost for %s as it saw it (seen %v), grace %s",
			w.who, c.Namespace, c.Name, node, w.now.Sub(since), ok, simGrace)
	}
}

// releasedVolume reports whether a volume was named by a PV released for
// node loss (deleted since, or still there), or given up on record for
// node loss by the in-flight reconciler: left on a lost node's disk.
func (w *World) releasedVolume(v *backendVolume) bool {
	return w.loss.givenUp[v.Node+"/"+v.Name] || w.releasedPV(v)
}

// releasedPV reports whether a PV released for node loss named the volume:
// no DeleteVolume may ever reach it.
func (w *World) releasedPV(v *backendVolume) bool {
	if w.loss.released[v.ID] || w.loss.released[v.Name] {
		return true
	}
	for _, pv := range w.api.volumes() {
		if nodeloss.Released(pv) && (pv.Name == v.Name || pv.Spec.CSI != nil && pv.Spec.CSI.VolumeHandle == v.ID) {
			return true
		}
	}
	return false
}

// trackedByPV reports whether a PV names the volume's handle.
func (w *World) trackedByPV(v *backendVolume) bool {
	for _, pv := range w.api.volumes() {
		if pv.Spec.CSI != nil && pv.Spec.CSI.VolumeHandle == v.ID {
			return true
		}
	}
	return false
}

// volumeWrite is the PV a write would change (as stored) and what it
// would make of it; nil when it names no PV.
func (w *World) volumeWrite(verb string, action k8stesting.Action) (cur, next *v1.PersistentVolume) {
	if verb == "update" {
		next = action.(k8stesting.UpdateAction).GetObject().(*v1.PersistentVolume)
		cur, _ = w.api.peek(rVolumes, next.Name).(*v1.PersistentVolume)
		return cur, next
	}
	act := action.(k8stesting.PatchAction)
	cur, _ = w.api.peek(rVolumes, act.GetName()).(*v1.PersistentVolume)
	if cur == nil {
		return nil, nil
	}
	obj, err := mergePatch(cur, act.GetPatch())
	if err != nil {
		return nil, nil
	}
	return cur, obj.(*v1.PersistentVolume)
}

// checkAllReleased runs once the system settled with the nodes still
// lost, long past the grace: every claim of a class with the policy bound
// to a PV of a lost node has been released (its PV decided and the claim
// deleted).
func (w *World) checkAllReleased() {
	for _, pv := range w.api.volumes() {
		class, ok := w.api.peek(rClasses, pv.Spec.StorageClassName).(*storagev1.StorageClass)
		if !ok || !nodeloss.Policy(class) || pv.Spec.NodeAffinity == nil || w.claimOfRef(pv) == nil {
			continue // a class deleted meanwhile opts in no more
		}
		c := w.claimOfRef(pv)
		for _, n := range w.lostNodes() {
			values := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values
			if slices.Contains(values, n) && c.Spec.VolumeName == pv.Name && c.DeletionTimestamp == nil && w.lostOnAPI(n) {
				w.violate("claim %s/%s of PV %s on lost node %s is not released once the system settled (marks %v)",
					c.Namespace, c.Name, pv.Name, n, pv.Annotations)
			}
		}
	}
}
