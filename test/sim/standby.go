package sim

// A binder standing by for the lease keeps its caches warm
// (binder.Controller.Start): it listed everything when it started and
// follows the API since, with the simulator's lag, and its handlers fill
// its queues; its workers do not run, and it must never write. When the
// leader dies the standby leads with the caches it has, some events still
// undelivered: the old leader's last writes among them.

const standbyRole = "binder-standby"

// startStandby starts a second binder, standing by.
func (w *World) startStandby() string {
	w.standby = w.newBinder(standbyRole)
	return "a second binder stands by (caches listed, then followed)"
}

// failover kills the leading binder; the standby leads with its caches as
// they are (no new list) and its queues as its handlers filled them.
func (w *World) failover() string {
	b := w.standby
	w.standby = nil
	w.failovers++
	if len(b.caches.pendingKeys()) > 0 || len(b.caches.waiting()) > 0 {
		w.failoversBehind++ // the case a cold start cannot have
	}
	b.role = "binder"
	w.loss.seen["binder"] = w.loss.seen[standbyRole]
	w.loss.goneSeen["binder"] = w.loss.goneSeen[standbyRole]
	w.loss.shown["binder"] = w.loss.shown[standbyRole]
	w.forget(standbyRole)
	b.claimQ.name, b.volumeQ.name = "binder-claims", "binder-volumes"
	w.bind = b
	return "crash: the binder dies; the standby leads with its warm caches (no new list)"
}

// counts say how often some paths were taken: node loss, failovers.
func (w *World) counts() map[string]int {
	c := w.lossCounts()
	c["binder failovers"] = w.failovers
	c["binder failovers with caches behind"] = w.failoversBehind
	c["CreateVolume refused"] = w.refusedCreates
	c["claims that waited for an edit after a refusal"] = w.infeasibleWaits
	c["classes deleted with their claims"] = w.classesWithClaims
	c["record formats no reader reads, written"] = w.unreadWritten
	c["upgrades and rollbacks"] = w.releaseChanges
	c["records written by the previous release"] = w.previousRecords
	c["CreateVolumes tried again refused by the claim's read"] = w.staleRetries
	c["deleted claims held by such a format until repair"] = w.unreadHeld
	c["settling steps a Terminating namespace waited for finalizers"] = w.nsWaits
	w.snapshotCounts(c)
	w.adminCounts(c)
	for k, n := range w.scoped {
		c[k] = n
	}
	return c
}
