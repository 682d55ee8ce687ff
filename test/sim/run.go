package sim

import (
	"fmt"
	"hash/fnv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/inflight"
)

// Disabled names the actors left out of a run (make sim SIM_WITHOUT=forge,
// strip): create, delete, clone, forge, strip, delete-namespace,
// create-namespace, edit-vac, retain, delete-released, node,
// recreate-class, class-with-claims, static-pv, static-delete-pv,
// delete-bound-pv, hostname-twin, refuse-pv, other-cluster, crash-provisioner,
// crash-binder, standby-binder, failover-binder, upgrade-binder,
// upgrade-provisioner, sweep, attach, detach, lease and switch and hand-back
// (centralised mode), csinode and affinity-pv (node mode), node-loss, node-return,
// node-notready, statefulset, rebind-pv, class-policy, autoscaler,
// snapshot, delete-snapshot, restore, snapshot-finalizer, delete-content,
// edit-content, select-node, expand-claim, edit-claim-vac, set-volume-name,
// edit-unbound-pv, edit-pv-meta, delete-secret, class-topology; the other
// controllers' schedule and snapshot-controller; restores-at-rest leaves
// the restores at rest out (snapshot_spec.go), gaps-at-rest the gap moves
// at rest (gap_rest.go); and node-mode or central-mode leaves that
// deployment mode out. writers.go says which field each writes.
var Disabled = map[string]bool{}

// option is one thing the scheduler may do next.
type option struct {
	weight int
	run    func() string
}

// Result is one schedule's outcome.
type Result struct {
	Seed       int64
	Steps      int
	Violations []string
	Trace      []string
	// Counts say how often some paths were taken (node loss).
	Counts map[string]int
	// Offered are the actor moves the schedule offered (writers.go).
	Offered map[string]bool
}

// RunSchedule runs one schedule: the actors for cfg.Steps steps, then
// quiescence (actors stopped, faults off) with the hand-back check, then a
// tear-down (every claim deleted) run to quiescence with the end checks.
func RunSchedule(seed int64) Result {
	w := newWorld(seed)
	w.setup()
	for i := 0; i < w.provisioners(); i++ {
		w.startProvisioner(i)
	}
	w.startBinder()
	w.tracef("seed %d: %+v", seed, w.cfg)
	w.actors, w.faults = true, true
	for i := 0; i < w.cfg.Steps; i++ {
		w.step(false)
	}
	w.actors, w.faults = false, false
	w.tracef("---- actors stop, faults off")
	w.loseAtRest()
	if w.upstream {
		// EP and KCM's binder do what is pending, then tether is back.
		w.settle(0)
		w.tracef("%s", w.switchStack())
	}
	w.repair()
	w.settle(0)
	w.churnAtRest()
	w.deleteBoundAtRest()
	w.checkDetachedGone()
	w.checkHandBack()
	w.gapsAtRest()
	if w.restoresAtRest() {
		w.restoreSpec()
	}
	if w.teardownClasses() {
		w.suiteSpec()
	}
	w.tracef("---- tear-down: every claim deleted")
	w.attachBound()
	for _, c := range w.api.claims() {
		_ = w.api.Delete(rClaims, c.Namespace, c.Name, nil)
	}
	w.deleteSnapshots()
	if w.teardownClasses() {
		w.tracef("---- tear-down: every class deleted with the claims")
		w.deleteClasses()
	}
	w.settle(3)
	w.checkEnd()
	w.killHandover()
	return Result{Seed: seed, Steps: w.steps, Violations: w.violations, Trace: w.trace, Counts: w.counts(), Offered: w.offered}
}

// step picks one option at random, by weight, runs it and checks the
// invariants. In settle mode only the system's own work is picked.
func (w *World) step(settling bool) bool {
	w.checkHandover()
	opts := w.options(settling)
	total := 0
	for _, o := range opts {
		total += o.weight
	}
	if total == 0 {
		return false
	}
	r := w.rng.Intn(total)
	for _, o := range opts {
		if r -= o.weight; r < 0 {
			w.steps++
			mark := len(w.trace)
			w.trace = append(w.trace, "")
			w.trace[mark] = fmt.Sprintf("%4d t=%-5d %s", w.steps, int(w.now.Sub(epoch).Seconds()), o.run())
			w.checkStep()
			return true
		}
	}
	return false
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (w *World) queues() []*queue {
	var qs []*queue
	for _, p := range w.provs {
		if p.node != "" && w.loss.down[p.node] {
			continue // its machine is down: the process does not run
		}
		qs = append(qs, p.procQueues()...)
	}
	if b := w.bind; b != nil {
		qs = append(qs, b.claimQ, b.volumeQ)
	}
	return qs
}

func (w *World) options(settling bool) []option {
	var opts []option
	add := func(weight int, run func() string) { opts = append(opts, option{weight, run}) }
	// In node mode a claim goes through more hands before its CreateVolume
	// (the scheduler, the binder, its node's process): the system's work
	// weighs more, so that volumes are made while the actors and faults
	// are still on.
	sys := 1
	if w.cfg.Node {
		sys = 3
	}
	cs := []*caches{w.bind.caches}
	if w.standby != nil {
		cs = append(cs, w.standby.caches)
	}
	for _, p := range w.provs {
		cs = append(cs, p.caches)
	}
	for _, c := range cs {
		if keys := c.pendingKeys(); len(keys) > 0 {
			add(8*sys, func() string {
				k := pick(w, keys)
				c.deliver(k[0], k[1])
				return fmt.Sprintf("deliver %s %s to the %s", k[0], k[1], w.procName(c))
			})
		}
	}
	w.burstOptions(cs, add, 8*sys)
	w.relistOptions(settling, add, 8*sys)
	w.behindOptions(add, 8*sys)
	for _, c := range cs {
		if ls := c.waiting(); len(ls) > 0 {
			add(8*sys, func() string {
				l := pick(w, ls)
				what := l.l.next()
				return fmt.Sprintf("notify the %s's %s handler #%d: %s", w.procName(c), l.resource, l.index, what)
			})
		}
	}
	for _, q := range w.queues() {
		q.promote(w.now)
		if w.busyOld(q) {
			continue // its lease is lost: it takes no new work
		}
		if q == w.bind.claimQ || q == w.bind.volumeQ {
			if !w.bind.ctrl.Synced() {
				continue // Run's workers wait for the handlers' first lists
			}
			w.bind.ctrl.QueueFirstLists() // once, as Run does then
		}
		if keys := q.readyKeys(); len(keys) > 0 {
			add(5*sys, func() string { return w.work(q, pick(w, keys)) })
		}
	}
	if h := w.handover; h != nil && h.q != nil && !h.ran {
		add(5, w.finishCall)
	}
	if n := len(w.back.pending); n > 0 {
		add(2, func() string { w.back.finish(w.rng.Intn(n)); return "driver: a timed-out CreateVolume completes" })
	}
	// The other controllers' work: its moves are in writers.go too.
	system := func(name string, weight int, run func() string) {
		if !Disabled[name] {
			w.offered[name] = true
			add(weight, run)
		}
	}
	if len(w.schedulable()) > 0 && len(w.schedulableNodes()) > 0 {
		system("schedule", 2*sys*sys, w.schedule)
	}
	if len(w.snapshotJobs()) > 0 {
		system("snapshot-controller", 6*sys, w.snapshotController)
	}
	if work := w.namespaceWork(); len(work) > 0 {
		add(2, w.namespaceController)
	} else if settling && len(w.terminating()) > 0 {
		w.nsWaits++
	}
	if len(w.detachable()) > 0 {
		add(1, w.controllerDetach)
	}
	if len(w.pvProtectable()) > 0 {
		add(2, w.pvProtectionController)
	}
	if settling {
		return opts
	}
	add(2*sys, func() string {
		d := time.Duration(1+w.rng.Intn(20)) * time.Second
		// And a fraction of a second, from a hash (the random stream is
		// left as it was): times written in whole seconds (RFC 3339 marks)
		// must agree with the clock that wrote them (issue 28's first e2e).
		h := fnv.New32a()
		fmt.Fprintf(h, "%d/%d/tick", w.seed, w.steps)
		d += time.Duration(h.Sum32()%1000) * time.Millisecond
		w.now = w.now.Add(d)
		return fmt.Sprintf("time passes: %s", d)
	})
	if !w.actors {
		return opts
	}
	actor := func(name string, weight int, run func() string) {
		if !Disabled[name] && (w.only == nil || w.only[name]) {
			w.offered[name] = true
			add(weight, run)
		}
	}
	actor("create", 4, w.tenantCreate)
	actor("delete", 3, w.tenantDelete)
	actor("clone", 2, w.tenantClone)
	actor("forge", 1, w.tenantForge)
	actor("strip", 1, w.tenantStrip)
	actor("format", 1, w.tenantFormat)
	actor("delete-namespace", 1, w.tenantDeleteNamespace)
	if len(w.liveNamespaces()) < 3 {
		actor("create-namespace", 1, w.tenantNamespace)
	}
	actor("edit-vac", 1, w.editVAC)
	actor("retain", 1, w.adminRetain)
	actor("delete-released", 1, w.adminDeleteReleased)
	actor("node", 1, w.adminNode)
	actor("recreate-class", 1, w.adminRecreateClass)
	actor("class-with-claims", 1, w.classWithClaims)
	actor("static-pv", 1, w.adminStaticPV)
	actor("static-delete-pv", 1, w.adminStaticDeletePV)
	actor("delete-bound-pv", 1, w.adminDeleteBoundPV)
	actor("hostname-twin", 1, w.hostnameTwin)
	if !w.refusingPVs() {
		actor("refuse-pv", 1, w.startRefusingPVs)
	}
	if w.cfg.Node {
		actor("affinity-pv", 1, w.adminAffinityPV)
	}
	if len(w.keptPVs()) > 0 {
		actor("rebind-pv", 1, w.adminRebind)
	}
	actor("class-policy", 1, w.adminClassPolicy)
	actor("autoscaler", 1, w.autoscaler)
	actor("other-cluster", 1, w.otherCluster)
	if len(w.attachable()) > 0 {
		actor("attach", 4, w.adminAttach)
	}
	if len(w.api.keys(rVAs)) > 0 {
		actor("detach", 2, w.adminDetach)
	}
	actor("crash-provisioner", 1, func() string {
		i := w.rng.Intn(len(w.provs))
		w.startProvisioner(i)
		return "crash: the " + w.provs[i].name + " restarts (memory lost, caches re-listed)"
	})
	actor("crash-binder", 1, func() string { w.startBinder(); return "crash: the binder restarts (memory lost, caches re-listed)" })
	if !w.upstream {
		actor("upgrade-binder", 1, w.upgradeBinder)
		if w.handover == nil {
			actor("upgrade-provisioner", 1, w.upgradeProvisioner)
		}
		if w.standby == nil {
			actor("standby-binder", 1, w.startStandby)
		} else {
			actor("failover-binder", 1, w.failover)
		}
	}
	if !w.busyOld(w.provs[0].ifQ) && !w.upstream {
		if up := w.upProvs(); len(up) > 0 {
			actor("sweep", 1, func() string { return w.sweep(pick(w, up)) })
		}
	}
	actor("node-loss", w.lossWeight(), w.nodeLoss)
	if len(w.lostNodes()) > 0 {
		actor("node-return", 1, w.nodeReturn)
	}
	actor("node-notready", 1, w.nodeNotReady)
	if len(w.loss.claims) > 0 {
		actor("statefulset", 2, w.statefulSet)
	}
	if !w.cfg.Node && w.handover == nil && !w.upstream {
		actor("lease", 1, w.loseLease)
	}
	if !w.cfg.Node && w.handover == nil {
		actor("switch", 1, w.switchStack)
	}
	if w.upstream && w.handBackLeft {
		actor("hand-back", 2, w.handBackAgain)
	}
	if w.cfg.Node {
		actor("csinode", 1, w.adminCSINode)
	}
	actor("snapshot", 2, w.tenantSnapshot)
	if len(w.api.keys(rSnapshots)) > 0 {
		actor("delete-snapshot", 1, w.tenantDeleteSnapshot)
		actor("snapshot-finalizer", 1, w.tenantSnapshotFinalizer)
	}
	actor("restore", 1, w.tenantRestore)
	if len(w.api.keys(rContents)) > 0 {
		actor("delete-content", 1, w.adminDeleteContent)
		actor("edit-content", 1, w.adminEditContent)
	}
	actor("select-node", 1, w.tenantSelectNode)
	actor("hand-over", 1, w.tenantHandOver)
	actor("relabel-node", 1, w.adminRelabel)
	if len(w.boundClaims()) > 0 {
		actor("expand-claim", 2, w.tenantExpand)
	}
	if !w.cfg.Node || With["claim-vac-node"] {
		actor("edit-claim-vac", 1, w.tenantClaimVAC)
	}
	actor("set-volume-name", 1, w.tenantVolumeName)
	if len(w.unboundPVs()) > 0 {
		actor("edit-unbound-pv", 2, w.adminEditUnboundPV)
	}
	actor("edit-pv-meta", 1, w.adminEditPVMeta)
	actor("delete-secret", 1, w.tenantDeleteSecret)
	actor("class-topology", 1, w.adminClassTopology)
	return opts
}

func (w *World) procName(c *caches) string {
	for _, p := range w.provs {
		if c == p.caches {
			return p.name
		}
	}
	if w.standby != nil && c == w.standby.caches {
		return standbyRole
	}
	return "binder"
}

// work runs one key of a queue through its owner's sync.
func (w *World) work(q *queue, key string) string {
	q.take(key)
	ctx := w.ctx
	var err error
	w.who = q.name
	defer func() { w.who = "" }()
	for _, p := range w.procs() {
		switch q {
		case p.lib.claimQ:
			err = p.lib.syncClaim(ctx, key)
		case p.lib.volumeQ:
			err = p.lib.syncVolume(ctx, key)
		case p.lib.saveQ:
			err = p.lib.syncSave(ctx, key)
		case p.cloneQ:
			err = p.clones.Reconcile(ctx, key)
		case p.snapQ:
			err = p.snapshots.Reconcile(ctx, key)
		case p.staticQ:
			if p.static != nil {
				if obj, ok, _ := p.caches.inf[rVolumes].indexer.GetByKey(key); ok {
					w.notePVSeen(p.caches, obj.(*v1.PersistentVolume))
				}
				w.deleting = key // its Delete is the PV's own
				err = p.static.Reconcile(ctx, key)
				w.deleting = ""
			}
		case p.ifQ:
			if obj, ok, _ := p.caches.inf[rClaims].indexer.GetByKey(key); ok {
				w.cleanup = obj.(*v1.PersistentVolumeClaim)
			}
			w.settler = p
			err = p.inflight.Reconcile(ctx, key)
			w.cleanup, w.settler = nil, nil
		}
	}
	switch q {
	case w.bind.claimQ:
		before := w.handedOff(key)
		err = w.bind.ctrl.SyncClaim(ctx, key)
		if !before && w.handedOff(key) {
			w.checkHandOff(key)
		}
	case w.bind.volumeQ:
		err = w.bind.ctrl.SyncVolume(ctx, key)
	}
	if err != nil {
		q.AddRateLimited(key)
		return fmt.Sprintf("%s %s: %v", q.name, key, err)
	}
	q.Forget(key)
	return fmt.Sprintf("%s %s: ok", q.name, key)
}

func (w *World) sweep(p *provProc) string {
	w.who = "sweep" + p.suffix()
	defer func() { w.who = "" }()
	if len(p.caches.backfill) > 0 {
		w.scoped["orphan sweeps run while a listing was behind the watch"]++
	}
	err := p.sweeper.Sweep(w.ctx)
	return fmt.Sprintf("orphan sweep%s: %v", p.suffix(), err)
}

// repair undoes the admin's moves that would leave claims waiting for
// ever, once the actors stop: deleted classes and nodes come back (lost
// ones with their disks), and every volume is detached; and the tenant's
// record formats that no reader reads go, and the gap moves' secrets and
// topologies are put back (repairGaps).
func (w *World) repair() {
	w.unformat()
	w.repairGaps()
	w.detachAll()
	for _, n := range w.lostNodes() {
		w.returnNode(n)
	}
	for _, c := range []string{classImmediate, classWFFC, classSecret, classRetain} {
		if w.api.peek(rClasses, c) == nil {
			w.create(w.class(c, 0))
		}
	}
	w.readdNodes()
}

// readdNodes adds the nodes the admin deleted for good (new machines), and
// puts the driver back on every CSINode.
func (w *World) readdNodes() {
	for _, n := range nodeNames {
		if w.api.peek(rNodes, n) == nil && !w.loss.lost[n] {
			if w.api.peek(rCSINodes, n) != nil {
				_ = w.api.Delete(rCSINodes, "", n, nil)
			}
			w.addNode(n)
		} else if w.api.peek(rNodes, n) != nil && !w.driverOn(n) {
			w.setDriverOn(n, true)
		}
	}
}

// quietAfter is how long settle(0) lets time pass for retries alone.
const quietAfter = 30 * time.Minute

// settle runs the system until nothing is pending: when no work is ready,
// time jumps to the next delayed key; then it sweeps, sweeps more times
// a minute apart.
func (w *World) settle(sweeps int) { w.settleQuiet(sweeps, quietAfter) }

// settleQuiet is settle, with quiet for how long time may pass for
// retries alone.
func (w *World) settleQuiet(sweeps int, quiet time.Duration) {
	start := w.now
	for budget := 1500; budget > 0; budget-- {
		if w.step(true) {
			continue
		}
		var next time.Time
		found := false
		for _, q := range w.queues() {
			if t, ok := q.next(); ok && (!found || t.Before(next)) {
				next, found = t, true
			}
		}
		if found && sweeps == 0 && next.Sub(start) > quiet {
			// Only retries are left (a clone of a source that is gone
			// waits for ever, as with external-provisioner).
			w.tracef("---- quiet: only retries left after %s", quiet)
			return
		}
		if found {
			w.now = next
			continue
		}
		if sweeps > 0 {
			sweeps--
			w.steps++
			for _, p := range w.provs {
				w.trace = append(w.trace, fmt.Sprintf("%4d t=%-5d %s", w.steps, int(w.now.Sub(epoch).Seconds()), w.sweep(p)))
			}
			w.checkStep()
			w.now = w.now.Add(61 * time.Second)
			continue
		}
		return
	}
	w.tracef("---- still busy after the settle budget")
}

// checkHandBack runs provisioner --hand-back in a fresh process (its
// caches listed whole), as docs/migration.md says, once the system is
// quiet: it must exit 0 (no claim keeps its record), except for claims
// still waiting for a volume and claims whose record the tenant wrote; and
// exit 0 only then (checkNoneLeftUnnamed). Then tether starts again.
//
// In node mode every node's provisioner hands back in turn (a record is
// its node's to settle); a claim is left when it still holds its record
// after all of them.
func (w *World) checkHandBack() {
	left := map[string]bool{}
	failed := false
	for i := range w.provs {
		w.startProvisionerAs(i, true)
		p := w.provs[i]
		w.who = "hand-back" + p.suffix()
		keys, err := p.inflight.HandBack(w.ctx)
		w.who = ""
		w.tracef("---- hand-back%s: left %v, err %v", p.suffix(), keys, err)
		for _, k := range keys {
			left[k] = true
		}
		failed = failed || err != nil
	}
	if !failed {
		w.checkNoneLeftUnnamed(left)
	}
	for _, key := range sortedKeys(left) {
		c, ok := w.api.peek(rClaims, key).(*v1.PersistentVolumeClaim)
		if !ok || !inflight.Holds(c) {
			continue
		}
		if c.Spec.VolumeName != "" && !w.forged[string(c.UID)] {
			w.violate("provisioner --hand-back cannot exit 0: claim %s is bound to %s and keeps its record", key, c.Spec.VolumeName)
		}
	}
	for i := range w.provs {
		w.startProvisioner(i)
	}
	w.settle(0)
}

// checkNoneLeftUnnamed: a --hand-back that exits 0 on every node leaves no
// claim holding this driver's record but those it named (left) and those
// whose record the tenant wrote: the upstream pair would take over claims
// whose record it does not know.
func (w *World) checkNoneLeftUnnamed(left map[string]bool) {
	for _, c := range w.api.claims() {
		key := objKey(c.Namespace, c.Name)
		drv := c.Annotations[inflight.AnnDriver]
		if !inflight.Holds(c) || (drv != "" && drv != driverName) || left[key] || w.forged[string(c.UID)] {
			continue
		}
		w.violate("provisioner --hand-back exits 0 on every node, but claim %s holds its record (bound to %q)", key, c.Spec.VolumeName)
	}
}

// hashFault is a fault drawn from the step and a name instead of the
// shared random stream, for calls whose order within a step tether does
// not fix (the sweep ranges over a map).
func (w *World) hashFault(name string, percent uint32) bool {
	if !w.faults {
		return false
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%d/%d/%s", w.seed, w.steps, name)
	return h.Sum32()%100 < percent
}

var _ = metav1.Now
