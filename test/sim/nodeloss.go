package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

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

// policyClass reports whether a class of the simulated cluster opts in
// when it is made.
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

	// policyEver: classes that opted in at some time (a binder's cache may
	// still say so); affinities counts the PVs of generated affinities by
	// shape; rebound counts the kept PVs
	// bound again; spotSeq names the autoscaler's nodes.
	policyEver       map[string]bool
	affinities       map[string]int
	affinityReleased int
	affinitySeq      int
	rebound          int
	spotSeq          int
	// deleteSent: claim UIDs whose deletion the binder sent for node loss;
	// graceFrom: when each claim's grace started, as its marks said.
	deleteSent map[string]bool
	graceFrom  map[string]time.Time
	// goneSeen[who][node] is when the process who saw the node deleted;
	// shown[who] are the nodes its events last showed present.
	goneSeen map[string]map[string]time.Time
	shown    map[string]map[string]bool
	// tracked is the binder's tracker as last checked; forgotten counts
	// the nodes it forgot.
	tracked   trackerSeen
	forgotten int
}

func newLossState() lossState {
	return lossState{lost: map[string]bool{}, down: map[string]bool{}, seen: map[string]map[string]time.Time{}, released: map[string]bool{},
		givenUp: map[string]bool{}, policyEver: map[string]bool{classWFFC: true, classRetain: true}, affinities: map[string]int{},
		deleteSent: map[string]bool{}, graceFrom: map[string]time.Time{}, goneSeen: map[string]map[string]time.Time{},
		shown: map[string]map[string]bool{}}
}

// observe is what a process saw of a node (nil: deleted).
func (w *World) observe(who, name string, node *v1.Node) {
	m := w.loss.seen[who]
	if m == nil {
		m = map[string]time.Time{}
		w.loss.seen[who] = m
	}
	since := w.now
	if node != nil {
		t := outOfService(node)
		if t == nil {
			delete(m, name)
			return
		}
		if t.TimeAdded != nil && !t.TimeAdded.IsZero() && t.TimeAdded.Time.Before(since) {
			since = t.TimeAdded.Time
		}
	}
	if t, ok := m[name]; !ok || since.Before(t) {
		m[name] = since
	}
}

// outOfService is the node's out-of-service taint, or nil (read here, not
// through pkg/nodeloss, whose mutants the checks must catch).
func outOfService(node *v1.Node) *v1.Taint {
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].Key == v1.TaintNodeOutOfService {
			return &node.Spec.Taints[i]
		}
	}
	return nil
}

// forget: a process restarts and remembers nothing.
func (w *World) forget(who string) {
	delete(w.loss.seen, who)
	delete(w.loss.goneSeen, who)
	delete(w.loss.shown, who)
}

// lostOnAPI reports whether the API says a node is lost now.
func (w *World) lostOnAPI(name string) bool {
	n, ok := w.api.peek(rNodes, name).(*v1.Node)
	return !ok || outOfService(n) != nil
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
	w.watchNodeHandlerOf(inf, func() string { return who })
}

// watchNodeHandlerOf is watchNodeHandler for a process whose name changes
// (a standby binder that comes to lead).
func (w *World) watchNodeHandlerOf(inf *informer, name func() string) {
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
				w.observe(name(), n.Name, nil)
				w.nodeGoneSeen(name(), n.Name)
			} else {
				w.observe(name(), n.Name, n)
				w.nodeShown(name(), n.Name)
			}
		}}
	}
}

// nodeLoss takes a node's machine down: the admin taints it out of
// service, or deletes its Node object (its disk stays).
func (w *World) nodeLoss() string {
	var up []string
	for _, n := range nodeNames {
		if node, ok := w.api.peek(rNodes, n).(*v1.Node); ok && outOfService(node) == nil && !w.loss.lost[n] {
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
	c := map[string]int{"claims released": w.loss.claimsDeleted, "PVs deleted": w.loss.pvsDeleted, "claims made again": w.loss.remade,
		"kept PVs bound again": w.loss.rebound, "autoscaler nodes": w.loss.spotSeq,
		"nodes the binder's tracker forgot": w.loss.forgotten}
	for shape, n := range w.loss.affinities {
		c["PVs of generated affinities"] += n
		if strings.HasPrefix(shape, "pins a node") {
			c["of them pinning a node"] += n
		}
	}
	c["of them released for node loss"] = w.loss.affinityReleased
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

// boundOn lists the nodes of the Bound PVs of classes with the policy.
func (w *World) boundOn() map[string]bool {
	out := map[string]bool{}
	for _, pv := range w.api.volumes() {
		if pv.Status.Phase == v1.VolumeBound && w.policyOn(pv.Spec.StorageClassName) && pv.Spec.NodeAffinity != nil {
			if n := pinOf(pv); n != "" {
				out[n] = true
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
	late := false
	if w.cfg.Node && w.rng.Intn(2) == 0 {
		w.settle(0)
		late = w.rng.Intn(4) == 0
		lose := sortedKeys(w.boundOn())
		if pin, ok := w.affinityAtRest(); ok {
			w.settle(0)
			lose = append([]string{pin}, lose...)
		}
		for _, n := range lose {
			if !w.loss.lost[n] && w.api.peek(rNodes, n) != nil {
				if late {
					w.tracef("---- the classes opt out before the loss, and in again after it")
					w.tracef("%s", w.setPolicy(classWFFC, false))
					w.tracef("%s", w.setPolicy(classRetain, false))
				}
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
	w.lossAtRestMoves(late)
	if len(w.lostNodes()) == 0 {
		w.settle(0)
		return
	}
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
		w.offered["statefulset"] = true
		w.tracef("%s", w.statefulSet())
		if len(w.loss.claims) > 0 && w.api.peek(rClaims, w.loss.claims[0].Namespace+"/"+w.loss.claims[0].Name) != nil {
			break // its old claim is still there
		}
	}
	w.settle(0)
	if w.rebindAtRest() {
		w.settle(0)
		w.checkAllReleased()
	}
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
