package sim

import (
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/nodeloss"
)

// Node loss (issue 28). A node is lost when the admin taints it
// node.kubernetes.io/out-of-service, or deletes its Node object; its disk
// stays, and the node may come back with it. Mostly its machine is down:
// in node mode its provisioner does not run and its driver does not
// answer; a tainted node's machine may also be up with only kubelet gone,
// its provisioner and driver still at work (as the real-node test's).
// A node may also go NotReady without the taint: nothing may happen then.
// The classes wffc and keep release claims on node loss (nodeloss.AnnPolicy),
// the others do not; the binder and the in-flight reconciler wait
// simGrace. A StatefulSet makes a released claim again under its name.
//
// The checks, at each write and event that carries a decision:
//   - the binder marks only PVs of classes with the policy;
//   - it decides a release (AnnReleased) only while the node is lost on
//     the API server's word, and lost for simGrace as the binder saw it
//     (its node events and its own reads of the node: a return it saw
//     ends a loss, one it never saw does not);
//   - it deletes only the claim its PV's claimRef names (by UID), bound
//     to that PV, of a class with the policy, while the node is lost, once
//     the release is decided; it deletes only the PV (Delete) of such a
//     release once its claim is gone, and removes the provisioner's
//     finalizer only then;
//   - the in-flight reconciler drops another node's record
//     (VolumeInFlightNodeGone) only under the same rules and grace;
//   - no DeleteVolume ever reaches a volume a released PV named;
//   - a released volume left on a node's disk is tracked by nothing and
//     exempt from the tracking check; at the end, with every node back,
//     the sweep has reported it.

// simGrace is the node-loss grace of the simulated binder and provisioners.
const simGrace = 30 * time.Second

// policyClass reports whether a class of the simulated cluster opts in.
func policyClass(name string) bool { return name == classWFFC || name == classRetain }

// lossState is the simulator's memory of node loss.
type lossState struct {
	// lost: taken out by nodeLoss (tainted, or its Node deleted), until it
	// comes back; down: its machine is down too (its disk kept).
	lost, down map[string]bool
	// seen[who][node] is since when the process who has seen the node lost
	// (its node events and reads), by the tracker's rule; absent: it last
	// saw it up, or never saw it.
	seen map[string]map[string]time.Time
	// released: volume IDs and names of the PVs the binder deleted after
	// a release; claims: the claims it released, for the StatefulSet.
	released map[string]bool
	// givenUp: node/name of the volumes whose in-flight record another
	// node's provisioner dropped for node loss (VolumeInFlightNodeGone).
	givenUp map[string]bool
	claims  []*v1.PersistentVolumeClaim
	// counts of what happened, for the run's summary.
	claimsDeleted, pvsDeleted, remade int
}

func newLossState() lossState {
	return lossState{lost: map[string]bool{}, down: map[string]bool{}, seen: map[string]map[string]time.Time{}, released: map[string]bool{},
		givenUp: map[string]bool{}}
}

// observe is what a process saw of a node (nil: deleted).
func (w *World) observe(who, name string, node *v1.Node) {
	m := w.loss.seen[who]
	if m == nil {
		m = map[string]time.Time{}
		w.loss.seen[who] = m
	}
	st := nodeloss.StateOf(name, node, w.now)
	if st.Loss == nodeloss.NotLost {
		delete(m, name)
		return
	}
	if t, ok := m[name]; !ok || st.Since.Before(t) {
		m[name] = st.Since
	}
}

// forget: a process restarts and remembers nothing.
func (w *World) forget(who string) { delete(w.loss.seen, who) }

// lostOnAPI reports whether the API says a node is lost now.
func (w *World) lostOnAPI(name string) bool {
	n, ok := w.api.peek(rNodes, name).(*v1.Node)
	return !ok || nodeloss.OutOfServiceTaint(n) != nil
}

// observingHandler shows the simulator each node its handler is handed.
type observingHandler struct {
	h   cache.ResourceEventHandler
	see func(obj any, deleted bool)
}

func (o observingHandler) OnAdd(obj any, initial bool) { o.see(obj, false); o.h.OnAdd(obj, initial) }
func (o observingHandler) OnUpdate(old, obj any)       { o.see(obj, false); o.h.OnUpdate(old, obj) }
func (o observingHandler) OnDelete(obj any)            { o.see(obj, true); o.h.OnDelete(obj) }

// watchNodeHandler makes the next node handler registered on a process's
// node informer report what it is handed as that process's sight.
func (w *World) watchNodeHandler(inf *informer, who string) {
	inf.wrapNext = func(h cache.ResourceEventHandler) cache.ResourceEventHandler {
		return observingHandler{h: h, see: func(obj any, deleted bool) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			n, ok := obj.(*v1.Node)
			if !ok {
				return
			}
			if deleted {
				w.observe(who, n.Name, nil)
			} else {
				w.observe(who, n.Name, n)
			}
		}}
	}
}

// nodeLoss takes a node's machine down: the admin taints it out of
// service, or deletes its Node object (its disk stays).
func (w *World) nodeLoss() string {
	var up []string
	for _, n := range nodeNames {
		if node, ok := w.api.peek(rNodes, n).(*v1.Node); ok && nodeloss.OutOfServiceTaint(node) == nil && !w.loss.lost[n] {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return "admin: no node to lose"
	}
	return w.nodeLossOf(pick(w, up))
}

// nodeLossOf takes one node's machine down.
func (w *World) nodeLossOf(n string) string {
	w.loss.lost[n] = true
	if w.rng.Intn(2) == 0 {
		w.loss.down[n] = true
		_ = w.api.Delete(rNodes, "", n, nil)
		_ = w.api.Delete(rCSINodes, "", n, nil)
		return "admin: node " + n + " is lost: its Node object deleted (its disk stays)"
	}
	node := w.api.Get(rNodes, "", n).(*v1.Node)
	taint := v1.Taint{Key: v1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute}
	if w.rng.Intn(2) == 0 {
		t := metav1.NewTime(w.now)
		taint.TimeAdded = &t
	}
	node.Spec.Taints = append(node.Spec.Taints, taint)
	node.ResourceVersion = ""
	_, _ = w.api.Update(node, false)
	w.loss.down[n] = w.rng.Intn(3) > 0
	return fmt.Sprintf("admin: node %s is lost: tainted out-of-service (timeAdded %v, machine down %v)", n, taint.TimeAdded != nil, w.loss.down[n])
}

// lostNodes are the nodes a nodeLoss took down.
func (w *World) lostNodes() []string {
	var out []string
	for _, n := range nodeNames {
		if w.loss.lost[n] {
			out = append(out, n)
		}
	}
	return out
}

// nodeReturn brings a lost node back: its taint goes, or it registers
// again; its machine is up with its disk, and its provisioner starts.
func (w *World) nodeReturn() string {
	lost := w.lostNodes()
	if len(lost) == 0 {
		return "admin: no lost node to bring back"
	}
	n := pick(w, lost)
	w.returnNode(n)
	return "admin: node " + n + " is back (its disk with it)"
}

func (w *World) returnNode(n string) {
	w.tracef("  node %s is back", n)
	if node, ok := w.api.Get(rNodes, "", n).(*v1.Node); ok {
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == v1.TaintNodeOutOfService })
		node.ResourceVersion = ""
		_, _ = w.api.Update(node, false)
	} else {
		if w.api.peek(rCSINodes, n) != nil {
			_ = w.api.Delete(rCSINodes, "", n, nil)
		}
		w.addNode(n)
	}
	if w.loss.lost[n] {
		// Its machine (re)starts: a new provisioner process.
		delete(w.loss.lost, n)
		delete(w.loss.down, n)
		if i := slices.Index(nodeNames, n); w.cfg.Node && i < len(w.provs) {
			w.startProvisioner(i)
		}
	}
}

// nodeNotReady turns a node's Ready condition over, without any taint:
// no release may follow.
func (w *World) nodeNotReady() string {
	n := pick(w, nodeNames)
	node, ok := w.api.Get(rNodes, "", n).(*v1.Node)
	if !ok {
		return "node controller: node " + n + " is gone"
	}
	status := v1.ConditionFalse
	if len(node.Status.Conditions) > 0 && node.Status.Conditions[0].Status == v1.ConditionFalse {
		status = v1.ConditionTrue
	}
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: status}}
	node.ResourceVersion = ""
	_, _ = w.api.Update(node, false)
	return fmt.Sprintf("node controller: node %s Ready=%s (no taint)", n, status)
}

// statefulSet makes a released claim again from its template, under its
// name (Kubernetes 1.27+), once the old one is gone.
func (w *World) statefulSet() string {
	var free []*v1.PersistentVolumeClaim
	for _, c := range w.loss.claims {
		ns, ok := w.api.peek(rNamespaces, c.Namespace).(*v1.Namespace)
		if ok && ns.DeletionTimestamp == nil && w.api.peek(rClaims, c.Namespace+"/"+c.Name) == nil {
			free = append(free, c)
		}
	}
	if len(free) == 0 {
		return "statefulset: no released claim to make again"
	}
	tmpl := pick(w, free)
	w.loss.claims = slices.DeleteFunc(w.loss.claims, func(c *v1.PersistentVolumeClaim) bool { return c == tmpl })
	c := w.newClaim(tmpl.Namespace, *tmpl.Spec.StorageClassName, "1Gi")
	c.Name = tmpl.Name
	out, err := w.api.Create(c)
	if err != nil {
		return "statefulset: " + err.Error()
	}
	w.claimNS[string(out.(*v1.PersistentVolumeClaim).UID)] = c.Namespace
	w.loss.remade++
	return fmt.Sprintf("statefulset: make claim %s/%s again (uid %s)", c.Namespace, c.Name, shortUID(out.(*v1.PersistentVolumeClaim).UID))
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

// policyAnnotations is the class annotation of a class that opts in.
func policyAnnotations(name string) map[string]string {
	if policyClass(name) {
		return map[string]string{nodeloss.AnnPolicy: "true"}
	}
	return nil
}

// upProvs are the provisioner processes whose machine is up.
func (w *World) upProvs() []*provProc {
	var out []*provProc
	for _, p := range w.provs {
		if p.node == "" || !w.loss.down[p.node] {
			out = append(out, p)
		}
	}
	return out
}

// lossCounts say how much of node loss a schedule went through.
func (w *World) lossCounts() map[string]int {
	c := map[string]int{"claims released": w.loss.claimsDeleted, "PVs deleted": w.loss.pvsDeleted, "claims made again": w.loss.remade}
	for _, e := range w.events {
		switch {
		case e.kind == "*v1.PersistentVolume" && (e.reason == "NodeLost" || e.reason == "ReleasedForNodeLoss" || e.reason == "NodeBack"):
			c[e.reason]++
		case e.reason == "VolumeInFlightNodeGone":
			c[e.reason]++
		}
	}
	for _, id := range sortedKeys(w.back.vols) {
		if v := w.back.vols[id]; !v.Deleted && w.releasedVolume(v) && w.reported(v) {
			c["released volumes reported"]++
		}
	}
	return c
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

// boundOn lists the nodes of the Bound PVs of classes with the policy.
func (w *World) boundOn() map[string]bool {
	out := map[string]bool{}
	for _, pv := range w.api.volumes() {
		if pv.Status.Phase == v1.VolumeBound && policyClass(pv.Spec.StorageClassName) && pv.Spec.NodeAffinity != nil {
			for _, n := range nodeNames {
				if pv.Name != "" && slices.Contains(pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values, n) {
					out[n] = true
				}
			}
		}
	}
	return out
}

// lossWeight makes a node loss likelier once volumes of a class with the
// policy are bound on a node.
func (w *World) lossWeight() int {
	if w.cfg.Node && len(w.boundOn()) > 0 {
		return 4
	}
	return 1
}

// loseAtRest: once the actors stop, in half the node-mode schedules, the
// system settles, a node that holds bound volumes of a class with the
// policy is lost, the releases run to their end with it down, and the
// StatefulSet makes the released claims again; then the nodes come back
// (repair).
//
// In the other half, when in-flight records stand for a node's volumes
// (their CreateVolume timed out), that node is lost at once: the other
// node's in-flight reconciler drops them after the grace.
func (w *World) loseAtRest() {
	if w.cfg.Node {
		// The nodes the admin deleted for good come back first, as repair
		// brings them (their provisioners delete their Released volumes).
		w.readdNodes()
	}
	if w.cfg.Node && w.rng.Intn(2) == 0 {
		w.settle(0)
		for _, n := range sortedKeys(w.boundOn()) {
			if !w.loss.lost[n] && w.api.peek(rNodes, n) != nil {
				w.tracef("---- node loss at rest: %s", w.nodeLossOf(n))
				break
			}
		}
	} else if w.cfg.Node {
		for _, c := range w.api.claims() {
			if n := recordNode(c); inflight.Holds(c) && n != "" && !w.loss.lost[n] && w.api.peek(rNodes, n) != nil {
				w.tracef("---- node loss with records in flight: %s", w.nodeLossOf(n))
				break
			}
		}
	}
	if len(w.lostNodes()) == 0 {
		return
	}
	if w.rng.Intn(3) == 0 {
		// Back before the grace is over: the marks go, nothing is released.
		w.quiesce()
		when := "within the grace"
		if t, ok := w.nextDue(); ok && w.rng.Intn(2) == 0 {
			// Just as the grace ends: the binder's next look at a PV is
			// due when the node's return has not reached it yet.
			w.now, when = t, "as the grace ends"
		}
		n := pick(w, w.lostNodes())
		w.tracef("---- node %s back %s", n, when)
		w.returnNode(n)
		if len(w.lostNodes()) == 0 {
			return
		}
	}
	w.tracef("---- nodes %v stay lost", w.lostNodes())
	if w.rng.Intn(2) == 0 {
		// The binder crashes somewhere in the release: it resumes from
		// the PVs' marks, timing the grace again from its own sight.
		w.quiesce()
		if t, ok := w.nextDue(); ok && w.rng.Intn(2) == 0 {
			w.now = t // around the decision
		} else {
			w.now = w.now.Add(simGrace / 2) // in the grace
		}
		for i, n := 0, w.rng.Intn(30); i < n; i++ {
			if !w.step(true) {
				break
			}
		}
		w.startBinder()
		w.tracef("---- crash: the binder restarts in the release")
	}
	w.settle(0)
	w.checkAllReleased()
	for len(w.loss.claims) > 0 {
		w.tracef("%s", w.statefulSet())
		if len(w.loss.claims) > 0 && w.api.peek(rClaims, w.loss.claims[0].Namespace+"/"+w.loss.claims[0].Name) != nil {
			break // its old claim is still there
		}
	}
	w.settle(0)
}

// nextDue is the earliest time a delayed key of any queue is due.
func (w *World) nextDue() (time.Time, bool) {
	var next time.Time
	found := false
	for _, q := range w.queues() {
		if t, ok := q.next(); ok && (!found || t.Before(next)) {
			next, found = t, true
		}
	}
	return next, found
}

// quiesce runs the system's own work until none is ready, without letting
// time pass.
func (w *World) quiesce() {
	for i := 0; i < 1500; i++ {
		if !w.step(true) {
			return
		}
	}
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
