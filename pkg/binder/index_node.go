package binder

import (
	v1 "k8s.io/api/core/v1"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

// The index's PVs by the node names they may pin or be marked for, so
// that a node's loss or return looks only at the PVs that may be its own,
// not at every PV: a node event costs the PVs of that node, not of the
// cluster (make bench-binder-restart BENCH_CHURN measures it).
//
// A PV is filed under its node-loss mark's node and under the value of
// every requirement "<key> In [<value>]" of its required node affinity
// (the only requirements nodeloss.Pinned reads): a superset of the nodes
// it may be pinned to, whatever the labels say. The caller checks each PV
// it gets back.

// nodeValues are the names a PV is filed under.
func nodeValues(pv *v1.PersistentVolume) []string {
	var out []string
	if mark := pv.Annotations[nodeloss.AnnLostNode]; mark != "" {
		out = append(out, mark)
	}
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return out
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, req := range term.MatchExpressions {
			if req.Operator == v1.NodeSelectorOpIn && len(req.Values) == 1 {
				out = append(out, req.Values[0])
			}
		}
	}
	return out
}

// fileByNode files pv under its node values (add) or takes it out.
func (ix *Index) fileByNode(pv *v1.PersistentVolume, add bool) {
	for _, v := range nodeValues(pv) {
		names := ix.byNode[v]
		switch {
		case add && names == nil:
			ix.byNode[v] = map[string]struct{}{pv.Name: {}}
		case add:
			names[pv.Name] = struct{}{}
		case names != nil:
			delete(names, pv.Name)
			if len(names) == 0 {
				delete(ix.byNode, v)
			}
		}
	}
}

// OfNode returns the PVs filed under any of the names (a node's name, its
// hostname label), each once, in no order: every PV that may be pinned to
// that node or is marked for it, and maybe others.
func (ix *Index) OfNode(names ...string) []*v1.PersistentVolume {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []*v1.PersistentVolume
	seen := map[string]bool{}
	for _, n := range names {
		for name := range ix.byNode[n] {
			if pv := ix.vols[name]; pv != nil && !seen[name] {
				seen[name] = true
				out = append(out, pv)
			}
		}
	}
	return out
}
