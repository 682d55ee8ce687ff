package sim

import (
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/binder"
	"github.com/tether-csi/tether/pkg/nodeloss"
)

// The checks of node loss (see nodeloss.go), at the writes and events
// that carry its decisions.

// The checks and moves read the marks and the class's opt-in themselves,
// not through pkg/nodeloss's helpers: an oracle that shares the code under
// test changes with its mutants (make mutate runs the simulator).

// isReleased: the PV carries the release mark.
func isReleased(pv *v1.PersistentVolume) bool {
	_, ok := pv.Annotations[nodeloss.AnnReleased]
	return ok
}

// hasMarks: the PV carries any of the binder's node-loss marks.
func hasMarks(pv *v1.PersistentVolume) bool {
	for _, k := range nodeloss.Marks {
		if _, ok := pv.Annotations[k]; ok {
			return true
		}
	}
	return false
}

// classOptsIn: the class asks for the release on node loss.
func classOptsIn(class *storagev1.StorageClass) bool {
	return class != nil && class.Annotations[nodeloss.AnnPolicy] == "true"
}

// checkBinderWrite checks a write of the binder's against the rules of
// node loss, before it is applied.
func (w *World) checkBinderWrite(verb, res, ns string, action k8stesting.Action) {
	switch {
	case (verb == "update" || verb == "patch") && res == rVolumes && action.GetSubresource() == "":
		cur, next := w.volumeWrite(verb, action)
		if cur == nil || next == nil {
			return
		}
		if next.ResourceVersion != "" && next.ResourceVersion != cur.ResourceVersion {
			return // the API server refuses it (a conflict): nothing is written
		}
		if next.Annotations[nodeloss.AnnLostNode] != "" && next.Annotations[nodeloss.AnnLostNode] != cur.Annotations[nodeloss.AnnLostNode] &&
			!w.loss.policyEver[next.Spec.StorageClassName] {
			w.violate("binder: marked PV %s of class %s, which never released claims on node loss", next.Name, next.Spec.StorageClassName)
		}
		if uid := next.Annotations[nodeloss.AnnLostClaim]; uid != "" && (uid != cur.Annotations[nodeloss.AnnLostClaim] ||
			next.Annotations[nodeloss.AnnLostSince] != cur.Annotations[nodeloss.AnnLostSince]) {
			if since, err := time.Parse(time.RFC3339, next.Annotations[nodeloss.AnnLostSince]); err == nil {
				w.loss.graceFrom[uid] = since
			}
		}
		if isReleased(next) && !isReleased(cur) {
			w.checkRelease(next)
		}
		if isReleased(cur) && !isReleased(next) && cur.Spec.ClaimRef != nil &&
			w.loss.deleteSent[string(cur.Spec.ClaimRef.UID)] && next.Spec.ClaimRef != nil && next.Spec.ClaimRef.UID == cur.Spec.ClaimRef.UID {
			w.violate("binder: removed the release of PV %s after the deletion of its claim (uid %s) was sent: its volume may get a DeleteVolume",
				cur.Name, shortUID(cur.Spec.ClaimRef.UID))
		}
		if slices.Contains(cur.Finalizers, nodeloss.FinalizerDeletion) && !slices.Contains(next.Finalizers, nodeloss.FinalizerDeletion) {
			if !isReleased(cur) || w.claimOfRef(cur) != nil {
				w.violate("binder: removed the provisioner's finalizer from PV %s (released %v, claim alive %v)", cur.Name, isReleased(cur), w.claimOfRef(cur) != nil)
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
		if !isReleased(pv) || pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete || w.claimOfRef(pv) != nil {
			w.violate("binder: deleted PV %s (released %v, policy %s, claim alive %v)", name, isReleased(pv),
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
	if strings.HasPrefix(pv.Name, "affinity-") {
		w.loss.affinityReleased++
	}
	if !w.lostOnAPI(node) {
		w.violate("binder: released the claim of PV %s while node %s is not lost", pv.Name, node)
		return
	}
	since, ok := w.loss.seen["binder"][node]
	if !ok || w.now.Sub(since) < simGrace {
		w.violate("binder: released the claim of PV %s, node %s lost for %s as the binder saw it (seen %v), grace %s",
			pv.Name, node, w.now.Sub(since), ok, simGrace)
	}
	if !w.loss.policyEver[pv.Spec.StorageClassName] {
		w.violate("binder: released the claim of PV %s of class %s, which never opted in", pv.Name, pv.Spec.StorageClassName)
	}
	if w.twinPinned(pv) {
		w.checkTwinRelease(pv, node, "released a claim")
	} else if pin := pinOf(pv); pin != node {
		w.violate("binder: released the claim of PV %s for node %s; its affinity pins %q (%s)", pv.Name, node, pin, affinityShape(pv.Spec.NodeAffinity))
	}
	c := w.claimOfRef(pv)
	switch {
	case c == nil || c.DeletionTimestamp != nil:
		w.violate("binder: released PV %s, whose claim is gone or being deleted by its user (its volume takes the usual way)", pv.Name)
	case pv.Annotations[nodeloss.AnnLostClaim] != string(c.UID):
		w.violate("binder: released PV %s bound to claim %s/%s (uid %s), its marks naming claim %q", pv.Name, c.Namespace, c.Name,
			shortUID(c.UID), pv.Annotations[nodeloss.AnnLostClaim])
	default:
		w.checkClaimGrace(pv, c, "released")
	}
}

// checkClaimGrace: a claim is released only after its own grace, which
// starts no sooner than it was made.
func (w *World) checkClaimGrace(pv *v1.PersistentVolume, c *v1.PersistentVolumeClaim, what string) {
	from, ok := w.loss.graceFrom[string(c.UID)]
	switch {
	case !ok:
		w.violate("binder: %s claim %s/%s of PV %s, never marked lost for it", what, c.Namespace, c.Name, pv.Name)
	case from.Before(c.CreationTimestamp.Time.Truncate(time.Second)):
		w.violate("binder: %s claim %s/%s of PV %s: its grace started at %s, before the claim was made (%s)", what, c.Namespace, c.Name,
			pv.Name, from, c.CreationTimestamp.Time)
	case w.now.Sub(from) < simGrace:
		w.violate("binder: %s claim %s/%s of PV %s %s into its grace", what, c.Namespace, c.Name, pv.Name, w.now.Sub(from))
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
	case !isReleased(pv):
		w.violate("binder: deleted claim %s before the release of PV %s was decided", key, pv.Name)
	case !w.lostOnAPI(pv.Annotations[nodeloss.AnnLostNode]):
		w.violate("binder: deleted claim %s while node %s is not lost", key, pv.Annotations[nodeloss.AnnLostNode])
	case !w.policyOn(storagehelpers.GetPersistentVolumeClaimClass(c)):
		w.violate("binder: deleted claim %s of a class without the policy on the API", key)
	case w.twinPinned(pv):
		w.checkTwinRelease(pv, pv.Annotations[nodeloss.AnnLostNode], "deleted claim "+key)
	case pinOf(pv) != pv.Annotations[nodeloss.AnnLostNode]:
		w.violate("binder: deleted claim %s of PV %s for node %s; its affinity pins %q (%s)", key, pv.Name,
			pv.Annotations[nodeloss.AnnLostNode], pinOf(pv), affinityShape(pv.Spec.NodeAffinity))
	case pv.Annotations[nodeloss.AnnLostClaim] != string(c.UID):
		w.violate("binder: deleted claim %s (uid %s), whose PV %s's marks name claim %q", key, shortUID(c.UID), pv.Name,
			pv.Annotations[nodeloss.AnnLostClaim])
	default:
		w.checkClaimGrace(pv, c, "deleted")
	}
	w.loss.deleteSent[string(c.UID)] = true
	if pv != nil && pv.Spec.CSI != nil {
		// Its volume is released for node loss: no DeleteVolume may reach it.
		w.loss.released[pv.Spec.CSI.VolumeHandle] = true
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
		if isReleased(pv) && (pv.Name == v.Name || pv.Spec.CSI != nil && pv.Spec.CSI.VolumeHandle == v.ID) {
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
		if !ok || !classOptsIn(class) || pv.Spec.NodeAffinity == nil || w.claimOfRef(pv) == nil {
			continue // a class deleted meanwhile opts in no more
		}
		c := w.claimOfRef(pv)
		for _, n := range w.lostNodes() {
			if w.forgotten(n) && !hasMarks(pv) {
				continue // deleted longer than twice the grace ago, as the binder saw it: it knows the node no more (design.md)
			}
			if pinOf(pv) == n && !w.twinPinned(pv) && c.Spec.VolumeName == pv.Name && c.DeletionTimestamp == nil && w.lostOnAPI(n) {
				w.violate("claim %s/%s of PV %s on lost node %s is not released once the system settled (marks %v)",
					c.Namespace, c.Name, pv.Name, n, pv.Annotations)
			}
		}
	}
}

// forgotten reports whether the leading binder no longer knows a deleted
// node: it saw the deletion more than twice the grace ago, or never (it
// started since): its unmarked PVs are not released (design.md).
func (w *World) forgotten(n string) bool {
	return w.api.peek(rNodes, n) == nil && !w.bind.ctrl.KnowsNode(n)
}

// checkTracker: the leading binder's node tracker holds the nodes its
// events last showed present and those they showed deleted within twice
// the grace, however many came and went (and node-1 and node-2 always:
// it asks the API server about the nodes marks name, and a GET may show
// it one before its events do).
func (w *World) checkTracker() {
	if w.bind == nil || w.bind.ctrl == nil {
		return
	}
	role := w.bind.role
	known := map[string]bool{}
	for n := range w.loss.shown[role] {
		known[n] = true
	}
	for n, at := range w.loss.goneSeen[role] {
		if w.now.Sub(at) <= 2*simGrace+time.Second {
			known[n] = true
		}
	}
	for _, n := range nodeNames {
		known[n] = true // asked of the API server when marks name it
	}
	n := w.bind.ctrl.NodesTracked()
	if n > len(known) {
		w.violate("binder: its node tracker holds %d nodes; its events showed %d present or deleted within twice the grace", n, len(known))
	}
	// Count what the tracker forgot (it only shrinks by forgetting; a new
	// binder starts a new count).
	if t := &w.loss.tracked; t.ctrl == w.bind.ctrl && n < t.last {
		w.loss.forgotten += t.last - n
	}
	w.loss.tracked = trackerSeen{w.bind.ctrl, n}
}

// trackerSeen is the last size seen of a binder's node tracker.
type trackerSeen struct {
	ctrl *binder.Controller
	last int
}
