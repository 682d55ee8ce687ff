package sim

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/inflight"
)

// Node-deployment mode: one provisioner per node, each beside its node's
// driver, whose volumes are local to the node (the same name on two nodes
// is two volumes). What leads to a reschedule: a CreateVolume that timed
// out while the volume is made, then ResourceExhausted on the retry (the
// backend counts the volume being made), or the node's CSINode without the
// driver for a while (its plugin restarts); the scheduler then picks a node
// again. A deleted node takes its volumes with it.

// annNode is inflight.AnnNode, spelled out: the landed code (bfc0ec5), on
// which the simulator is also run, has no such annotation.
const annNode = "provisioner.tether.dev/in-flight-node"

// recordNode is the node a claim's record stands for in node mode: the
// node it names or, for a record of no node, the claim's selected node.
func recordNode(c *v1.PersistentVolumeClaim) string {
	if n := c.Annotations[annNode]; n != "" {
		return n
	}
	return c.Annotations[storagehelpers.AnnSelectedNode]
}

// driverOn reports whether a node's CSINode lists the driver.
func (w *World) driverOn(node string) bool {
	cn, ok := w.api.peek(rCSINodes, node).(*storagev1.CSINode)
	if !ok {
		return false
	}
	for _, d := range cn.Spec.Drivers {
		if d.Name == driverName {
			return true
		}
	}
	return false
}

// setDriverOn adds the driver to a node's CSINode, or removes it.
func (w *World) setDriverOn(node string, on bool) {
	cn, ok := w.api.Get(rCSINodes, "", node).(*storagev1.CSINode)
	if !ok {
		return
	}
	cn.Spec.Drivers = nil
	if on {
		cn.Spec.Drivers = []storagev1.CSINodeDriver{{Name: driverName, NodeID: node, TopologyKeys: []string{topologyKey}}}
	}
	cn.ResourceVersion = ""
	_, _ = w.api.Update(cn, false)
}

// adminCSINode takes the driver off a node's CSINode (its plugin
// restarts), or puts it back.
func (w *World) adminCSINode() string {
	n := pick(w, nodeNames)
	if w.api.peek(rCSINodes, n) == nil {
		return "node plugin: node " + n + " has no CSINode"
	}
	on := !w.driverOn(n)
	w.setDriverOn(n, on)
	if on {
		return "node plugin: the driver registers again on " + n
	}
	return "node plugin: the driver leaves the CSINode of " + n + " (restarting)"
}

// nodeGone: a deleted node's local volumes, and the creates still under
// way there, went with it.
func (b *backend) nodeGone(node string) {
	for _, id := range sortedKeys(b.vols) {
		if v := b.vols[id]; v.Node == node && !v.Deleted {
			v.Deleted, v.Gone = true, true
			delete(b.byName, v.Node+"/"+v.Name)
			b.w.tracef("  volume %s (%s) goes with node %s", v.ID, v.Name, node)
		}
	}
	kept := b.pending[:0]
	for _, p := range b.pending {
		if p.vol.Node != node {
			kept = append(kept, p)
		}
	}
	b.pending = kept
}

// machineGone: in node mode, a deleted node's machine is gone with its
// driver; a node added again under the name is a new machine.
func (w *World) machineGone(d *driver) bool {
	return d.node != "" && (w.api.peek(rNodes, d.node) == nil || w.loss.down[d.node])
}

// claimOfName is the claim (living or Terminating) whose UID a volume
// name carries, or nil.
func (w *World) claimOfName(name string) *v1.PersistentVolumeClaim {
	uid := uidOfName(name)
	for _, c := range w.api.claims() {
		if string(c.UID) == uid {
			return c
		}
	}
	return nil
}

// checkNodeCreate: in node mode no two provisioners provision one claim
// at once. When the library has a node's provisioner call CreateVolume,
// no other node may hold a volume of that name, made or being made: the
// other node's provisioner made it for the claim before it moved, and
// has not cleaned it up (a volume a tenant's removal of the record left
// behind is the tenant's doing). A volume given up on record
// (VolumeCleanupAbandoned: its clean-up got AlreadyExists, the request
// having changed since; VolumeInFlightNodeGone: its node lost for the
// grace, out of reach) does not hold the claim back: it is reported (the
// lost node's sweep, once it is back), and the claim goes on elsewhere.
func (w *World) checkNodeCreate(d *driver, name string) {
	if !w.cfg.Node || !w.provisioning() || w.stripped[name] {
		return
	}
	for _, n := range nodeNames {
		if n == d.node {
			continue
		}
		key := n + "/" + name
		if w.loss.givenUp[key] {
			continue // its record went for node loss: out of reach
		}
		if id, ok := w.back.byName[key]; ok && !w.abandoned(w.back.vols[id]) {
			w.violate("%s: CreateVolume of %s on %s while node %s holds %s of the claim (not cleaned up)%s", w.who, name, d.node, n, id, w.recordHint(name))
		}
		for _, p := range w.back.pending {
			if p.key == key {
				w.violate("%s: CreateVolume of %s on %s while node %s is still making one of the claim%s", w.who, name, d.node, n, w.recordHint(name))
			}
		}
	}
}

// provisioning: the step runs the library's Provision (not a clean-up,
// the sweep or hand-back).
func (w *World) provisioning() bool {
	for _, p := range w.provs {
		if w.who == p.lib.claimQ.name {
			return true
		}
	}
	return false
}

// checkNodeDelete: in node mode a DeleteVolume reaches only the driver of
// the volume's node, and a clean-up deletes only on its record's node.
func (w *World) checkNodeDelete(d *driver, v *backendVolume) {
	if !w.cfg.Node {
		return
	}
	if v.Node != d.node {
		w.violate("%s: DeleteVolume of %s (%s), a volume of %s, reached the driver of %s", w.who, v.ID, v.Name, v.Node, d.node)
	}
	c := w.cleanup
	if c == nil {
		return
	}
	if cur := w.claimOfName(ownName(c)); cur != nil && inflight.Holds(cur) {
		c = cur
	}
	if n := recordNode(c); n != d.node {
		w.violate("the clean-up of claim %s/%s deleted %s on %s, but its record stands for node %q", c.Namespace, c.Name, v.ID, d.node, n)
	}
}

// recordHint says what the claim's record stands for, for the messages.
func (w *World) recordHint(name string) string {
	c := w.claimOfName(name)
	switch {
	case c == nil:
		return " (its claim is gone)"
	case !inflight.Holds(c):
		return fmt.Sprintf(" (claim %s/%s holds no record; selected node %q)", c.Namespace, c.Name, c.Annotations[storagehelpers.AnnSelectedNode])
	case c.Annotations[annNode] == "":
		return fmt.Sprintf(" (the record of claim %s/%s names no node; selected node %q)", c.Namespace, c.Name, c.Annotations[storagehelpers.AnnSelectedNode])
	}
	return fmt.Sprintf(" (the record of claim %s/%s names node %s)", c.Namespace, c.Name, c.Annotations[annNode])
}

// tenantSelectNode writes the selected-node annotation of a claim of its
// namespace by hand, as the scheduler would (a tenant may write every
// annotation): a node that exists, one that does not, or none.
func (w *World) tenantSelectNode() string {
	cs := w.liveClaims(nil)
	if len(cs) == 0 {
		return "tenant: no claim"
	}
	c := pick(w, cs).DeepCopy()
	node := pick(w, append(slices.Clone(nodeNames), "node-9", ""))
	if node == "" {
		delete(c.Annotations, storagehelpers.AnnSelectedNode)
	} else {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[storagehelpers.AnnSelectedNode] = node
	}
	if _, err := w.api.Update(c, false); err != nil {
		return fmt.Sprintf("tenant: select node %q for %s/%s: %v", node, c.Namespace, c.Name, err)
	}
	return fmt.Sprintf("tenant: select node %q for claim %s/%s by hand", node, c.Namespace, c.Name)
}
