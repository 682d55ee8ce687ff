package sim

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

// The moves of writers.go that bear on node loss (issue 33): a class's
// policy on and off, PVs of generated affinities, a kept PV bound again, an autoscaler
// that adds nodes to the zones and removes them.

// policyOn reports whether a class opts in on the API now.
func (w *World) policyOn(name string) bool {
	class, ok := w.api.peek(rClasses, name).(*storagev1.StorageClass)
	return ok && classOptsIn(class)
}

// adminClassPolicy turns a class's release-on-node-loss annotation over.
func (w *World) adminClassPolicy() string {
	name := pick(w, []string{classImmediate, classWFFC, classSecret, classRetain})
	return w.setPolicy(name, !w.policyOn(name))
}

func (w *World) setPolicy(name string, on bool) string {
	class, ok := w.api.Get(rClasses, "", name).(*storagev1.StorageClass)
	if !ok {
		return "admin: class " + name + " is gone"
	}
	class.Annotations = map[string]string{}
	value := "true"
	if on {
		w.loss.policyEver[name] = true
	} else {
		// Off, the awkward ways too: absent, or a value that is not
		// "true" (design.md: only "true" opts in).
		value = pick(w, []string{"", "false", "True", "1", "absent"})
	}
	if value != "absent" {
		class.Annotations[nodeloss.AnnPolicy] = value
	}
	class.ResourceVersion = ""
	_, _ = w.api.Update(class, false)
	return fmt.Sprintf("admin: class %s releases claims on node loss: %v (%s: %q)", name, on, nodeloss.AnnPolicy, value)
}

// adminAffinityPV makes a PV of a generated node affinity (genAffinity:
// a node's own, a zone that may hold one node until the autoscaler adds
// one, several hosts, terms, a node that never was), pre-bound to a
// pending claim. The checks judge its release by pinOf alone, whatever
// nodes its zone holds.
func (w *World) adminAffinityPV() string {
	cs := w.liveClaims(func(c *v1.PersistentVolumeClaim) bool { return c.Spec.VolumeName == "" })
	if len(cs) == 0 {
		return "admin: no pending claim for a PV of its own affinity"
	}
	c := pick(w, cs)
	reclaim := pick(w, []v1.PersistentVolumeReclaimPolicy{v1.PersistentVolumeReclaimDelete, v1.PersistentVolumeReclaimRetain})
	pv := preBoundPV(c, "affinity", reclaim)
	pv.Spec.NodeAffinity = genAffinity(w)
	if _, err := w.api.Create(pv); err != nil {
		return "admin: PV of its own affinity: " + err.Error()
	}
	shape := affinityShape(pv.Spec.NodeAffinity)
	w.loss.affinities[shape]++
	return fmt.Sprintf("admin: PV %s (%s; %s, %s) pre-bound to %s/%s", pv.Name, shape, describeAffinity(pv.Spec.NodeAffinity), reclaim,
		c.Namespace, c.Name)
}

// affinityAtRest: in half the schedules that lose a node at rest, the
// admin first binds a new claim of a class that opts in to a PV of a
// generated affinity; the node lost is the one it pins, if any (ok).
func (w *World) affinityAtRest() (string, bool) {
	if w.rng.Intn(2) == 0 {
		return "", false
	}
	w.loss.affinitySeq++
	name := fmt.Sprintf("affinity-at-rest-%d", w.loss.affinitySeq)
	c := w.preBoundClaim(pick(w, []string{classWFFC, classRetain}), name)
	if c == nil {
		return "", false
	}
	reclaim := pick(w, []v1.PersistentVolumeReclaimPolicy{v1.PersistentVolumeReclaimDelete, v1.PersistentVolumeReclaimRetain})
	pv := preBoundPV(c, "affinity", reclaim)
	pv.Name, pv.Spec.CSI.VolumeHandle = name, name
	pv.Spec.NodeAffinity = genAffinity(w)
	if _, err := w.api.Create(pv); err != nil {
		return "", false
	}
	w.offered["affinity-pv"] = true
	shape := affinityShape(pv.Spec.NodeAffinity)
	w.loss.affinities[shape]++
	w.tracef("---- admin: PV %s (%s; %s, %s) bound to a new claim %s/%s of class %s", pv.Name, shape,
		describeAffinity(pv.Spec.NodeAffinity), reclaim, c.Namespace, c.Name, pv.Spec.StorageClassName)
	pin := pinOf(pv)
	return pin, pin != "" && !w.loss.lost[pin] && w.api.peek(rNodes, pin) != nil
}

// keptPVs are the Released Retain PVs: an admin may bind one again.
func (w *World) keptPVs() []*v1.PersistentVolume {
	var out []*v1.PersistentVolume
	for _, pv := range w.api.volumes() {
		if pv.Status.Phase == v1.VolumeReleased && pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimRetain &&
			pv.DeletionTimestamp == nil && pv.Spec.ClaimRef != nil {
			out = append(out, pv)
		}
	}
	return out
}

// adminRebind binds a kept PV again to a new claim of its class, made
// pre-bound to it (the admin's way to reuse a disk), marks and all.
func (w *World) adminRebind() string {
	kept := w.keptPVs()
	if len(kept) == 0 {
		return "admin: no kept PV to bind again"
	}
	pv := pick(w, kept).DeepCopy()
	c := w.preBoundClaim(pv.Spec.StorageClassName, pv.Name)
	if c == nil {
		return "admin: no namespace for a claim of kept PV " + pv.Name
	}
	return w.rebind(pv, c)
}

// preBoundClaim is a tenant's claim of a class whose spec.volumeName names
// a PV: under WaitForFirstConsumer, the binder binds it without waiting
// for a node (the scheduler would never pick one for a lost node's PV).
func (w *World) preBoundClaim(class, pv string) *v1.PersistentVolumeClaim {
	nss := w.liveNamespaces()
	if len(nss) == 0 {
		return nil
	}
	c := w.newClaim(pick(w, nss), class, "1Gi")
	c.Spec.VolumeName = pv
	out, err := w.api.Create(c)
	if err != nil {
		return nil
	}
	oc := out.(*v1.PersistentVolumeClaim)
	w.claimNS[string(oc.UID)] = oc.Namespace
	return oc
}

func (w *World) rebind(pv *v1.PersistentVolume, c *v1.PersistentVolumeClaim) string {
	pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name}
	pv.ResourceVersion = ""
	if _, err := w.api.Update(pv, false); err != nil {
		return "admin: bind kept PV again: " + err.Error()
	}
	w.loss.rebound++
	return fmt.Sprintf("admin: bind kept PV %s (marks %v) again to %s/%s", pv.Name, hasMarks(pv), c.Namespace, c.Name)
}

// spotNodes are the nodes the autoscaler made that exist.
func (w *World) spotNodes() []string {
	var out []string
	for _, k := range w.api.keys(rNodes) {
		if strings.HasPrefix(k, "spot-") {
			out = append(out, k)
		}
	}
	return out
}

// autoscaler adds a node to a zone, or removes one it added: over a
// schedule, many nodes come and go (the binder's tracker must not keep
// them all), and a zone that held one node holds two.
func (w *World) autoscaler() string {
	if churnSchedule(w.seed) {
		return w.autoscaleBurst()
	}
	spots := w.spotNodes()
	if len(spots) == 0 || len(spots) < 3 && w.rng.Intn(2) == 0 {
		w.loss.spotSeq++
		name := fmt.Sprintf("spot-%d", w.loss.spotSeq)
		zone := zoneOf(pick(w, nodeNames))
		w.create(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{zoneKey: zone}}})
		return "autoscaler: add node " + name + " to " + zone
	}
	name := pick(w, spots)
	_ = w.api.Delete(rNodes, "", name, nil)
	return "autoscaler: remove node " + name
}

// nodeGoneSeen records that a process saw a node's deletion (its events),
// for the tracker's bound.
func (w *World) nodeGoneSeen(who, name string) {
	m := w.loss.goneSeen[who]
	if m == nil {
		m = map[string]time.Time{}
		w.loss.goneSeen[who] = m
	}
	m[name] = w.now
	delete(w.loss.shown[who], name)
}

// nodeShown records that a process's events showed a node present.
func (w *World) nodeShown(who, name string) {
	m := w.loss.shown[who]
	if m == nil {
		m = map[string]bool{}
		w.loss.shown[who] = m
	}
	m[name] = true
}

// lossAtRestMoves are the writes of writers.go that meet a node loss at
// rest, each in some schedules: the classes opt in late (late: they opted
// out before the loss); a user deletes a claim of the lost node within
// the grace; an autoscaler adds a node to the lost node's zone; the node
// comes back just after the binder sent a released claim's deletion,
// before its cache saw it.
func (w *World) lossAtRestMoves(late bool) {
	if late {
		w.settle(0) // nothing is released: no class opts in
		w.tracef("%s", w.setPolicy(classWFFC, true))
		w.tracef("%s", w.setPolicy(classRetain, true))
	}
	lost := w.lostNodes()
	if len(lost) == 0 {
		return
	}
	n := pick(w, lost)
	if w.rng.Intn(4) == 0 {
		var mine []*v1.PersistentVolumeClaim
		for _, pv := range w.api.volumes() {
			if c := w.claimOfRef(pv); c != nil && c.DeletionTimestamp == nil && pinOf(pv) == n {
				mine = append(mine, c)
			}
		}
		if len(mine) > 0 {
			c := pick(w, mine)
			_ = w.api.Delete(rClaims, c.Namespace, c.Name, nil)
			w.tracef("---- tenant: delete claim %s/%s of lost node %s within the grace", c.Namespace, c.Name, n)
		}
	}
	if w.rng.Intn(4) == 0 {
		w.tracef("---- %s", w.autoscaler())
	}
	if w.rng.Intn(3) == 0 {
		// Run to the first claim deletion the binder sends, then the node
		// is back at once.
		sent := w.loss.claimsDeleted
		for i := 0; i < 200 && w.loss.claimsDeleted == sent; i++ {
			if !w.step(true) {
				t, ok := w.nextDue()
				if !ok {
					break
				}
				w.now = t
			}
		}
		if w.loss.claimsDeleted > sent {
			w.tracef("---- node %s back just after a released claim's deletion was sent", n)
			w.returnNode(n)
		}
	}
}

// rebindAtRest: in some schedules, once the releases are over, the admin
// binds a kept PV of a node still lost to a new claim: a new case, with
// its own grace.
func (w *World) rebindAtRest() bool {
	if w.rng.Intn(2) == 0 {
		return false
	}
	for _, pv := range w.keptPVs() {
		if !isReleased(pv) || !w.loss.lost[pv.Annotations[nodeloss.AnnLostNode]] {
			continue
		}
		c := w.preBoundClaim(pv.Spec.StorageClassName, pv.Name)
		if c == nil {
			return false
		}
		w.offered["rebind-pv"] = true
		w.tracef("---- %s", w.rebind(pv.DeepCopy(), c))
		return true
	}
	return false
}
