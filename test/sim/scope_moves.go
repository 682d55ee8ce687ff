package sim

import (
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
// reads its PVs' affinity against the labels, and lists its PVs again
// when a label it read is removed or changed (cmd/provisioner's relabel):
// so does the simulator's (relabel, relistOptions). The tier is a label no generated
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
	if scope.NarrowedLabels(before, node.Labels) {
		out += " (narrowed: its provisioner lists its PVs again once its cache has the change)"
	}
	return out
}

// relabel is a node-mode provisioner's watch of its node's labels, as
// cmd/provisioner's: a change that narrows them (scope.NarrowedLabels,
// from the labels last delivered to its cache) asks for a new listing of
// its PVs, which the backoff spaces (scope.RelistBackoff, on the
// simulator's clock). The process runs on meanwhile.
type relabel struct {
	node    string
	seen    map[string]string
	pending bool
	backoff scope.RelistBackoff
}

func newRelabel(node string) *relabel {
	return &relabel{node: node, backoff: scope.RelistBackoff{Min: 2 * time.Second, Max: 5 * time.Minute}}
}

// listed takes the labels the process read when its caches were filled.
func (r *relabel) listed(c *caches) {
	if r == nil {
		return
	}
	if n, ok := c.w.api.peek(rNodes, r.node).(*v1.Node); ok {
		r.seen = maps.Clone(n.Labels)
	}
}

// delivered takes a node delivered to the cache (nil: deleted, which
// changes nothing of what was seen).
func (r *relabel) delivered(key string, obj runtime.Object) {
	n, ok := obj.(*v1.Node)
	if r == nil || key != r.node || !ok {
		return
	}
	if scope.NarrowedLabels(r.seen, n.Labels) {
		r.pending = true
	}
	r.seen = maps.Clone(n.Labels)
}

// relistOptions are the steps that list a provisioner's PVs again: one
// per process whose node's labels narrowed, once its backoff allows (at
// once when settling: time would pass to it).
func (w *World) relistOptions(settling bool, add func(int, func() string), weight int) {
	for _, p := range w.provs {
		r := p.caches.relabel
		if r == nil || !r.pending || w.loss.down[p.node] || (!settling && r.backoff.Wait(w.now) > 0) {
			continue
		}
		add(weight, func() string {
			r.pending = false
			r.backoff.Started(w.now)
			kept, dropped := p.caches.relistResource(rVolumes)
			w.scoped["PV listings again after a node's labels narrowed"]++
			return fmt.Sprintf("the %s lists its PVs again (its node's labels narrowed): %d kept, %d dropped", p.name, kept, dropped)
		})
	}
}
