package sim

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// The moves of the world's gaps (issue 49): verbs of verbs_table.go that
// could change a decision of the binder or the provisioner and that no
// move wrote. Each writes what the API server lets its party write, with
// the awkward values included; what the API refuses (an unbound claim's
// expansion, a claim's attributes class set back to none) is left out.

// vacMissing is an attributes class no admin made.
const vacMissing = "silver"

// gapCounted counts a write of a gap move in the run's summary (in the
// scope counts' map, so that World keeps its fields).
func (w *World) gapCounted(what string) { w.scoped["gap moves: "+what]++ }

// boundClaims are the claims the tenant may expand: Bound ones, being
// deleted or not.
func (w *World) boundClaims() []*v1.PersistentVolumeClaim {
	var cs []*v1.PersistentVolumeClaim
	for _, c := range w.api.claims() {
		if c.Status.Phase == v1.ClaimBound {
			cs = append(cs, c)
		}
	}
	return cs
}

// unboundPVs are the PVs an admin may refit: Available or Released ones,
// not being deleted.
func (w *World) unboundPVs() []*v1.PersistentVolume {
	var pvs []*v1.PersistentVolume
	for _, pv := range w.api.volumes() {
		if (pv.Status.Phase == v1.VolumeAvailable || pv.Status.Phase == v1.VolumeReleased) && pv.DeletionTimestamp == nil {
			pvs = append(pvs, pv)
		}
	}
	return pvs
}

// tenantExpand raises a bound claim's storage request (the API lets only
// a bound claim's request change, and only up): by a gibibyte, or past
// any PV of the world. The claim may be a clone's source, bound to a PV
// other than its own volume while it still holds its record (then a
// clean-up's repeated CreateVolume asks the new size), or being deleted.
func (w *World) tenantExpand() string {
	cs := w.boundClaims()
	if len(cs) == 0 {
		return "tenant: no bound claim to expand"
	}
	c := pick(w, cs).DeepCopy()
	size := c.Spec.Resources.Requests[v1.ResourceStorage]
	if w.rng.Intn(3) == 0 {
		size = resource.MustParse("100Gi")
	} else {
		size.Add(resource.MustParse("1Gi"))
	}
	if c.Spec.Resources.Requests == nil {
		c.Spec.Resources.Requests = v1.ResourceList{}
	}
	c.Spec.Resources.Requests[v1.ResourceStorage] = size
	if _, err := w.api.Update(c, false); err != nil {
		return fmt.Sprintf("tenant: expand %s/%s: %v", c.Namespace, c.Name, err)
	}
	w.gapCounted("claims expanded")
	if inflight.Holds(c) {
		w.gapCounted("claims expanded holding their record")
	}
	return fmt.Sprintf("tenant: expand claim %s/%s to %s (bound to %s, record %v)", c.Namespace, c.Name, size.String(),
		c.Spec.VolumeName, inflight.Holds(c))
}

// tenantClaimVAC changes a claim's attributes class, bound or not, being
// deleted or not: to gold, or to one no admin made. The API refuses a
// class set back to none. run.go offers it in node mode only with
// claim-vac-node in With: seed 475 of the run that added this move failed
// the node-loss check there (FINDINGS.md, the world's gaps).
func (w *World) tenantClaimVAC() string {
	cs := w.api.claims()
	if len(cs) == 0 {
		return "tenant: no claim for an attributes class"
	}
	c := pick(w, cs).DeepCopy()
	vac := pick(w, []string{vacGold, vacMissing})
	c.Spec.VolumeAttributesClassName = &vac
	if _, err := w.api.Update(c, false); err != nil {
		return fmt.Sprintf("tenant: attributes class %s on %s/%s: %v", vac, c.Namespace, c.Name, err)
	}
	w.gapCounted("claims' attributes class changed")
	return fmt.Sprintf("tenant: attributes class %s on claim %s/%s (%s)", vac, c.Namespace, c.Name, c.Status.Phase)
}

// volumeNameTargets are names a tenant may put in a claim's volumeName:
// every PV's (another claim's, a static one, a Released one), one no PV
// has, and own, the name of the claim's own volume, only with
// own-volume-name in With: records.Decide takes a claim whose volumeName
// is its record's volume for one whose PV was saved, and drops the record
// of a volume no PV names (seed 1036 of the run that added this move,
// FINDINGS.md).
func (w *World) volumeNameTargets(own string) []string {
	out := []string{"pv-none"}
	if With["own-volume-name"] {
		out = append(out, own, own)
	}
	for _, pv := range w.api.volumes() {
		out = append(out, pv.Name)
	}
	return out
}

// tenantVolumeName sets a claim's spec.volumeName, which the API lets a
// tenant write once: a new claim made with it (naming, among others, the
// volume tether will make for it: UIDs are the API server's and
// predictable here, as a name read from a PV is in a cluster), or a
// pending claim's empty one set, also while its CreateVolume is under
// way.
func (w *World) tenantVolumeName() string {
	pending := w.liveClaims(func(c *v1.PersistentVolumeClaim) bool { return c.Spec.VolumeName == "" })
	if len(pending) > 0 && w.rng.Intn(2) == 0 {
		c := pick(w, pending).DeepCopy()
		c.Spec.VolumeName = pick(w, w.volumeNameTargets(ownName(c)))
		if _, err := w.api.Update(c, false); err != nil {
			return fmt.Sprintf("tenant: volumeName %s on %s/%s: %v", c.Spec.VolumeName, c.Namespace, c.Name, err)
		}
		w.gapCounted("pending claims given a volumeName")
		if c.Spec.VolumeName == ownName(c) && inflight.Holds(c) {
			w.gapCounted("of them naming their own volume while it is in flight")
		}
		return fmt.Sprintf("tenant: volumeName %s on pending claim %s/%s (record %v)", c.Spec.VolumeName, c.Namespace, c.Name, inflight.Holds(c))
	}
	nss := w.liveNamespaces()
	if len(nss) == 0 {
		return "tenant: no namespace"
	}
	ns := pick(w, nss)
	c := w.newClaim(ns, pick(w, []string{classImmediate, classWFFC, classSecret, classRetain}), "1Gi")
	next := fmt.Sprintf("0000aaaa-0000-4000-8000-%012x", w.api.uids+1)
	c.Spec.VolumeName = pick(w, w.volumeNameTargets(request.VolumeName(prefix, next, -1)))
	out, err := w.api.Create(c)
	if err != nil {
		return fmt.Sprintf("tenant: create claim %s/%s with volumeName %s: %v", ns, c.Name, c.Spec.VolumeName, err)
	}
	oc := out.(*v1.PersistentVolumeClaim)
	w.claimNS[string(oc.UID)] = ns
	w.gapCounted("claims made with a volumeName")
	return fmt.Sprintf("tenant: create claim %s/%s (%s, uid %s) with volumeName %s", ns, c.Name, *c.Spec.StorageClassName,
		shortUID(oc.UID), c.Spec.VolumeName)
}

// adminEditUnboundPV edits an Available or Released PV's fit: capacity,
// access modes, class, attributes class, labels, or node affinity (set
// from none, as the API allows without MutablePVNodeAffinity).
func (w *World) adminEditUnboundPV() string {
	pvs := w.unboundPVs()
	if len(pvs) == 0 {
		return "admin: no Available or Released PV to edit"
	}
	pv := pick(w, pvs).DeepCopy()
	what := pick(w, []string{"capacity", "accessModes", "storageClassName", "volumeAttributesClassName", "labels", "nodeAffinity"})
	var to string
	switch what {
	case "capacity":
		to = pick(w, []string{"1Gi", "100Gi"})
		pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse(to)}
	case "accessModes":
		mode := pick(w, []v1.PersistentVolumeAccessMode{v1.ReadWriteMany, v1.ReadOnlyMany, v1.ReadWriteOnce})
		pv.Spec.AccessModes, to = []v1.PersistentVolumeAccessMode{mode}, string(mode)
	case "storageClassName":
		to = pick(w, []string{classImmediate, classWFFC, classSecret, classRetain, ""})
		pv.Spec.StorageClassName = to
	case "volumeAttributesClassName":
		to = pick(w, []string{vacGold, vacMissing, ""})
		pv.Spec.VolumeAttributesClassName = nil
		if to != "" {
			pv.Spec.VolumeAttributesClassName = &to
		}
	case "labels":
		to = pick(w, []string{"gold", ""})
		if to == "" {
			delete(pv.Labels, tierKey)
		} else {
			metav1.SetMetaDataLabel(&pv.ObjectMeta, tierKey, to)
		}
	case "nodeAffinity":
		if pv.Spec.NodeAffinity != nil {
			return "admin: PV " + pv.Name + " has its node affinity (immutable once set)"
		}
		to = pick(w, affinityValues[topologyKey])
		pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: topologyKey, Operator: v1.NodeSelectorOpIn, Values: []string{to}}}}}}}
	}
	if _, err := w.api.Update(pv, false); err != nil {
		return fmt.Sprintf("admin: %s of PV %s to %q: %v", what, pv.Name, to, err)
	}
	w.gapCounted("unbound PVs refitted")
	return fmt.Sprintf("admin: %s of %s PV %s to %q", what, pv.Status.Phase, pv.Name, to)
}
