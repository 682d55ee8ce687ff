package nodeloss

import (
	v1 "k8s.io/api/core/v1"
)

// HostnameLabel is the node label whose value may differ from the node's
// name and still name it.
const HostnameLabel = v1.LabelHostname

// Resolve names the node a requirement "<key> In [<value>]" pins, or "":
// Tracker.Resolve is the binder's.
type Resolve func(key, value string) string

// Pinned names the one node a PV's required node affinity pins, or "".
//
// A term pins node N when one of its requirements is "<key> In [v]" with
// the one value v, and resolve says that (key, v) names N (for a node the
// binder saw: v is N's name and N carries the label key=v, or key is
// kubernetes.io/hostname and v is N's hostname label). A PV is pinned to
// N when every term pins N: no other node can ever be admitted, whatever
// nodes join or leave its zone.
//
// Anything else names no node: no terms, a term without such a
// requirement (a zone, a rack, several hosts in one requirement), terms
// or requirements that pin different nodes. The answer rests on the
// affinity and on what names a node, never on how many nodes a zone holds
// now: a zonal volume is never taken for a node's own.
func Pinned(pv *v1.PersistentVolume, resolve Resolve) string {
	if pv == nil || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	node := ""
	for i := range terms {
		pin := termPin(&terms[i], resolve)
		if pin == "" || node != "" && pin != node {
			return ""
		}
		node = pin
	}
	return node
}

// termPin is the node one term pins, or "" when it pins none or two.
func termPin(term *v1.NodeSelectorTerm, resolve Resolve) string {
	pin := ""
	for _, req := range term.MatchExpressions {
		if req.Operator != v1.NodeSelectorOpIn || len(req.Values) != 1 {
			continue
		}
		name := resolve(req.Key, req.Values[0])
		if name == "" {
			continue
		}
		if pin != "" && pin != name {
			return "" // two nodes in one term: it admits neither
		}
		pin = name
	}
	return pin
}
