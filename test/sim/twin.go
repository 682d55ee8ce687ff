package sim

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

// The hostname twin (hostname-twin, issue 49): a node whose
// kubernetes.io/hostname label is another node's name: node-1.dc2,
// labelled kubernetes.io/hostname=node-1, while node-1 (labelled so too)
// exists; and a PV pinned by `kubernetes.io/hostname In [node-1]`, bound
// to a new claim of a class that opts in to release on node loss. Such a
// value names neither node (design.md, "A volume's node": a hostname label
// is a node's only when one node carries it), so a loss of either must not
// release the claim: node-1's lost by the existing node-loss moves, the
// twin's by this move.

const (
	twinNode = "node-1.dc2"
	// twinHost is the hostname label both carry: node-1's name.
	twinHost = "node-1"
)

// hostnameTwin adds the twin (with a PV pinned by the shared value), or
// loses it (tainted out-of-service, or its Node deleted), or brings it back.
func (w *World) hostnameTwin() string {
	node, ok := w.api.Get(rNodes, "", twinNode).(*v1.Node)
	switch {
	case !ok:
		w.adm.twinEver = true
		w.create(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: twinNode,
			Labels: map[string]string{v1.LabelHostname: twinHost, zoneKey: zoneOf("node-1")}}})
		return fmt.Sprintf("admin: add node %s labelled %s=%s%s", twinNode, v1.LabelHostname, twinHost, w.twinPV())
	case outOfService(node) == nil:
		if w.rng.Intn(2) == 0 {
			_ = w.api.Delete(rNodes, "", twinNode, nil)
			return "admin: node " + twinNode + " is lost: its Node object deleted"
		}
		t := metav1.NewTime(w.now)
		node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: v1.TaintNodeOutOfService, Value: "nodeshutdown",
			Effect: v1.TaintEffectNoExecute, TimeAdded: &t})
		node.ResourceVersion = ""
		_, _ = w.api.Update(node, false)
		return "admin: node " + twinNode + " is lost: tainted out-of-service"
	}
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == v1.TaintNodeOutOfService })
	node.ResourceVersion = ""
	_, _ = w.api.Update(node, false)
	return "admin: node " + twinNode + " is back"
}

// twinPV binds a new claim of a class that opts in to a PV pinned by
// `kubernetes.io/hostname In [node-1]`, and says so ("" if none).
func (w *World) twinPV() string {
	w.adm.disks++
	name := fmt.Sprintf("twin-%d", w.adm.disks)
	c := w.preBoundClaim(pick(w, []string{classWFFC, classRetain}), name)
	if c == nil {
		return ""
	}
	reclaim := pick(w, []v1.PersistentVolumeReclaimPolicy{v1.PersistentVolumeReclaimDelete, v1.PersistentVolumeReclaimRetain})
	pv := preBoundPV(c, "twin", reclaim)
	pv.Name, pv.Spec.CSI.VolumeHandle = name, name
	pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{twinHost}}}}}}}
	if _, err := w.api.Create(pv); err != nil {
		return ", PV " + name + ": " + err.Error()
	}
	return fmt.Sprintf(", and PV %s (%s In [%s], %s) bound to a new claim %s/%s of class %s", name, v1.LabelHostname, twinHost,
		reclaim, c.Namespace, c.Name, *c.Spec.StorageClassName)
}

// known reports whether the leading binder knows a node: its events
// showed it, and not its deletion more than twice the grace ago (the
// tracker forgets a deleted node then).
func (w *World) known(node string) bool {
	if w.loss.shown["binder"][node] {
		return true
	}
	t, ok := w.loss.goneSeen["binder"][node]
	return ok && w.now.Sub(t) <= 2*simGrace
}

// pinNoTwin is pinOf where the twin's hostname value names no node.
func pinNoTwin(pv *v1.PersistentVolume) string {
	return pinOfWith(pv, func(key, value string) string {
		if key == v1.LabelHostname && value == twinHost {
			return ""
		}
		return nodeNamed(key, value)
	})
}

// twinPinned reports whether a PV's pin rests on the hostname value the
// twin shares (pinOf finds node-1 only through it), once the twin was
// made.
func (w *World) twinPinned(pv *v1.PersistentVolume) bool {
	return w.adm.twinEver && pinOf(pv) != pinNoTwin(pv)
}

// checkTwinRelease judges the release (what) of a twin-pinned PV for a
// node: while the binder knows both node-1 and the twin, the value names
// neither, and nothing is released; while it knows the twin and not
// node-1 (deleted and forgotten, or never seen), the value is the twin's
// alone, or node-1's by the PV's marks: either may be released; while
// it does not know the twin, the value is node-1's (pinOf's check), or
// the twin's when the PV's marks name it: a binder that knew the twin
// alone wrote them, and they vouch for a node no event showed since
// (seed 3261 of the gap moves: node-1 deleted, a binder restart, the twin
// lost and marked, a restart in the release that knew neither).
func (w *World) checkTwinRelease(pv *v1.PersistentVolume, node, what string) {
	switch {
	case !w.known(twinNode):
		if pin := pinOf(pv); pin != node && (node != twinNode || pv.Annotations[nodeloss.AnnLostNode] != twinNode) {
			w.violate("binder: %s for node %s, PV %s pinned by %s to %q", what, node, pv.Name, describeAffinity(pv.Spec.NodeAffinity), pin)
		}
	case w.known(twinHost):
		w.violate("binder: %s for node %s, PV %s pinned by %s; %s=%s is also node %s's label: the value names neither node",
			what, node, pv.Name, describeAffinity(pv.Spec.NodeAffinity), v1.LabelHostname, twinHost, twinNode)
	case node != twinNode && node != twinHost:
		w.violate("binder: %s for node %s, PV %s pinned by %s: it names node %s (or %s by its marks)", what, node, pv.Name,
			describeAffinity(pv.Spec.NodeAffinity), twinNode, twinHost)
	}
}

// noteTwinLoss counts a step at which node-1 is lost on the API while the
// binder knows it and the twin, and a claim bound to a PV pinned by the
// shared value only still uses it: the case a release must leave alone.
func (w *World) noteTwinLoss() {
	if !w.adm.twinEver || !w.lostOnAPI(twinHost) || !w.known(twinHost) || !w.known(twinNode) {
		return
	}
	for _, pv := range w.api.volumes() {
		if c := w.claimOfRef(pv); c != nil && c.Spec.VolumeName == pv.Name && c.DeletionTimestamp == nil && w.twinPinned(pv) {
			w.adm.twinLosses++
			return
		}
	}
}
