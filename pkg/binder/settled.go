package binder

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/migration"
)

// Settled reports whether a claim and the volume it names are bound to each
// other with nothing left for a sync of either to write: the claim's sync
// would find every binding step done (Writer.bind), the volume's would find
// it Bound with no message and nothing to anneal (DecideVolume).
//
// The informers deliver every object again each resync period (15 s, as
// KCM's binder). Syncing a settled pair then is work for nothing, and it is
// work that grows with the cluster: at 100,000 pairs every object came
// round some fifty times while they were bound, which made the binder's CPU
// per pair grow with N. A resync of a settled object is therefore skipped;
// any change to it or to its partner is an event of its own.
func Settled(claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) bool {
	if claim == nil || pv == nil {
		return false
	}
	ref := pv.Spec.ClaimRef
	return BindCompleted(claim) && claim.Spec.VolumeName == pv.Name &&
		claim.Status.Phase == v1.ClaimBound && claim.Status.Capacity != nil &&
		slices.Equal(claim.Status.AccessModes, pv.Spec.AccessModes) &&
		ref != nil && ref.UID == claim.UID && ref.Namespace == claim.Namespace && ref.Name == claim.Name &&
		pv.Status.Phase == v1.VolumeBound && pv.Status.Message == "" &&
		!migration.NeedsAnneal(pv)
}

// resync reports whether an informer's update is a resync: the same version
// delivered again.
func resync(old, obj any) bool {
	o, ok1 := old.(metav1.Object)
	n, ok2 := obj.(metav1.Object)
	return ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion()
}

// settledClaim and settledVolume answer Settled from the binder's caches,
// which hold the newest version of each object the binder knows.
func (c *Controller) settledClaim(claim *v1.PersistentVolumeClaim) bool {
	newest, ok := c.claims.Get(claim.Namespace, claim.Name)
	if !ok || newest.Spec.VolumeName == "" {
		return false
	}
	pv, _ := c.volumes.Get(newest.Spec.VolumeName)
	return Settled(newest, pv)
}

func (c *Controller) settledVolume(pv *v1.PersistentVolume) bool {
	newest, ok := c.volumes.Get(pv.Name)
	if !ok || newest.Spec.ClaimRef == nil {
		return false
	}
	claim, _ := c.claims.Get(newest.Spec.ClaimRef.Namespace, newest.Spec.ClaimRef.Name)
	return Settled(claim, newest)
}

// queueFirstLists queues, once, every claim and volume of the informers'
// first lists that a sync may have work for: all but the settled pairs,
// and every volume whose node loss is under way (nodeLossUnderWay:
// syncNodeLoss's own test). The handlers store the first lists
// without queueing them (a change after them is queued as it comes); Run
// calls this once the caches have synced, before the workers start.
//
// At rest nearly every pair is settled: queueing all of them at a start,
// as KCM does, would sync 200,000 objects at 100,000 pairs for nothing,
// and grow the queues' sets (and the queue metrics' table of add times) to
// that size, which Go's maps keep for the life of the process; in a
// standby, for as long as it stands by.
func (c *Controller) queueFirstLists() {
	c.queuedFirst.Do(func() {
		for _, claim := range c.claims.List() {
			if !c.settledClaim(claim) {
				c.claimQueue.Add(claimKey(claim.Namespace, claim.Name))
			}
		}
		for _, pv := range c.volumes.List() {
			if !c.settledVolume(pv) || c.nodeLossUnderWay(pv) {
				c.volumeQueue.Add(pv.Name)
			}
		}
	})
}
