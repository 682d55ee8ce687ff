package sim

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
)

// tenantClone makes a clone of a claim of its namespace: same class and
// request, spec.dataSource naming the source (bound or not, being deleted
// or not: the provisioner refuses what it must).
func (w *World) tenantClone() string {
	live := map[string]bool{}
	for _, ns := range w.liveNamespaces() {
		live[ns] = true
	}
	var sources, bound []*v1.PersistentVolumeClaim
	for _, c := range w.api.claims() {
		if live[c.Namespace] && c.Spec.StorageClassName != nil {
			sources = append(sources, c)
			if c.Status.Phase == v1.ClaimBound {
				bound = append(bound, c)
			}
		}
	}
	if len(sources) == 0 {
		return "tenant: nothing to clone"
	}
	// Mostly a bound claim: a clone of it is made at once, while the
	// actors and faults are still on.
	if len(bound) > 0 && w.rng.Intn(4) > 0 {
		sources = bound
	}
	src := pick(w, sources)
	c := w.newClaim(src.Namespace, *src.Spec.StorageClassName, src.Spec.Resources.Requests.Storage().String())
	c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: src.Name}
	out, err := w.api.Create(c)
	if err != nil {
		return fmt.Sprintf("tenant: clone claim %s/%s: %v", src.Namespace, src.Name, err)
	}
	oc := out.(*v1.PersistentVolumeClaim)
	w.claimNS[string(oc.UID)] = oc.Namespace
	return fmt.Sprintf("tenant: create claim %s/%s (uid %s), a clone of %s", oc.Namespace, oc.Name, shortUID(oc.UID), src.Name)
}

// checkCloneSource: no DeleteVolume reaches a volume that a CreateVolume
// still copies (one that timed out for its caller and goes on in the
// background), but where the tenant took the clone's record off itself.
func (w *World) checkCloneSource(v *backendVolume) {
	for _, p := range w.back.pending {
		if p.vol.Source != "volume:"+v.ID {
			continue
		}
		if w.stripped[p.vol.Name] || w.forged[uidOfName(p.vol.Name)] {
			continue
		}
		w.violate("%s: DeleteVolume of %s (%s) while the clone %s is still being copied from it", w.who, v.ID, v.Name, p.vol.Name)
	}
}

// checkCloneSources runs after every step: while a clone's CreateVolume
// may still run, or be repeated by its clean-up (it was sent, the clone
// holds its in-flight record and is not bound to its own volume), its
// source claim is there (the cloning protection holds it), but where the
// tenant wrote or removed the clone's record itself.
func (w *World) checkCloneSources() {
	for _, c := range w.api.claims() {
		own := ownName(c)
		if !inflight.Holds(c) || !w.cloned[own] || c.Spec.VolumeName == own || w.forged[string(c.UID)] || w.stripped[own] {
			continue
		}
		src, ok := protect.CloneSourceName(c)
		if !ok {
			continue
		}
		if w.api.peek(rClaims, objKey(c.Namespace, src)) == nil {
			w.violate("clone %s/%s may still be copied (it holds its record), and its source claim %s is gone", c.Namespace, c.Name, src)
		}
	}
}
