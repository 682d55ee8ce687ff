package sim

import (
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/provisioner/scope"
)

// otherDriver is a driver of another provisioner, named on a claim by hand.
const otherDriver = "other.csi.example.com"

// tierKey is a node label an admin sets and changes (relabel-node).
const tierKey = "example.com/tier"

// What decides which claims and PVs a provisioner keeps whole (package
// scope) is written by tenants (a claim's storage-provisioner annotation,
// its selected node, its record and finalizers: moves hand-over,
// select-node, forge, strip, format) and by admins (a node's labels, which
// a node-mode provisioner reads its PVs' affinity against: relabel-node).

// tenantHandOver edits the storage-provisioner annotation of one of the
// tenant's claims: removed (both keys), another driver's, this driver's,
// or this driver's under the beta key only. The binder writes it back on
// the claims it hands to a provisioner.
func (w *World) tenantHandOver() string {
	cs := w.liveClaims(nil)
	if len(cs) == 0 {
		return "tenant: no claim"
	}
	c := pick(w, cs).DeepCopy()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	how := pick(w, []string{"none", otherDriver, driverName, "beta"})
	delete(c.Annotations, storagehelpers.AnnStorageProvisioner)
	delete(c.Annotations, storagehelpers.AnnBetaStorageProvisioner)
	switch how {
	case "none":
	case "beta":
		c.Annotations[storagehelpers.AnnBetaStorageProvisioner] = driverName
	default:
		c.Annotations[storagehelpers.AnnStorageProvisioner] = how
	}
	if _, err := w.api.Update(c, false); err != nil {
		return fmt.Sprintf("tenant: storage-provisioner %s on %s/%s: %v", how, c.Namespace, c.Name, err)
	}
	return fmt.Sprintf("tenant: storage-provisioner %s on claim %s/%s by hand", how, c.Namespace, c.Name)
}

// adminRelabel changes one node's labels: a tier label set, changed or
// removed. A node-mode provisioner of the current release on that node
// reads its PVs' affinity against the labels, and its process starts
// again when a label it read is removed or changed (cmd/provisioner's
// caches): so does the simulator's. The tier is a label no generated
// affinity names: the node-loss checks take a node's labels as fixed
// (pinOf reads nodeLabels), and a rack or zone changed under them makes
// the binder and the checks disagree on which node a PV pins (seed 2605
// of the run that added this move); which PVs a changed label makes a
// node's is pinned by scope's table tests (TestVolume).
func (w *World) adminRelabel() string {
	var nodes []*v1.Node
	for _, n := range nodeNames {
		if node, ok := w.api.peek(rNodes, n).(*v1.Node); ok {
			nodes = append(nodes, node)
		}
	}
	if len(nodes) == 0 {
		return "admin: no node to label"
	}
	node := pick(w, nodes).DeepCopy()
	before := maps.Clone(node.Labels)
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	how := pick(w, []string{"gold", "silver", "no tier"})
	if how == "no tier" {
		delete(node.Labels, tierKey)
	} else {
		node.Labels[tierKey] = how
	}
	if _, err := w.api.Update(node, false); err != nil {
		return fmt.Sprintf("admin: label node %s %s: %v", node.Name, how, err)
	}
	out := fmt.Sprintf("admin: label node %s: %s", node.Name, how)
	if !scope.NarrowedLabels(before, node.Labels) {
		return out
	}
	for i, p := range w.provs {
		if p.node == node.Name && p.release == current && !w.upstream {
			w.startProvisioner(i)
			out += "; its provisioner starts again (a label it read changed)"
		}
	}
	return out
}
