package nodeloss

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// HostnameLabel is the node label whose value may differ from the node's
// name and still name it.
const HostnameLabel = v1.LabelHostname

// Resolve names the node a requirement "<key> In [<value>]" pins, or "":
// Tracker.Resolve is the binder's.
type Resolve func(key, value string) string

// Labels are the labels seen of a node; known is false when none were (a
// node only a PV's marks vouch for).
type Labels func(node string) (labels map[string]string, known bool)

// Pinned names the one node a PV's required node affinity pins, or "".
//
// A term pins node N when one of its requirements is "<key> In [v]" with
// the one value v, and resolve says that (key, v) names N (for a node the
// binder saw: v is N's name and N carries the label key=v, or key is
// kubernetes.io/hostname and v is N's hostname label), and N, as labels
// saw it, meets the whole term (a term that also asks for another host,
// or a zone N is not in, admits no node: its volume is on none that is
// known, and is not N's to release). A PV is pinned to
// N when every term pins N: no other node can ever be admitted, whatever
// nodes join or leave its zone.
//
// Anything else names no node: no terms, a term without such a
// requirement (a zone, a rack, several hosts in one requirement), terms
// or requirements that pin different nodes. The answer rests on the
// affinity and on what names a node, never on how many nodes a zone holds
// now: a zonal volume is never taken for a node's own.
func Pinned(pv *v1.PersistentVolume, resolve Resolve, labels Labels) string {
	if pv == nil || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	node := ""
	for i := range terms {
		pin := termPin(&terms[i], resolve, labels)
		if pin == "" || node != "" && pin != node {
			return ""
		}
		node = pin
	}
	return node
}

// termPin is the node one term pins, or "" when it pins none or two, or
// the node it names does not meet it.
func termPin(term *v1.NodeSelectorTerm, resolve Resolve, labels Labels) string {
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
	if pin == "" || labels == nil {
		return pin
	}
	if l, known := labels(pin); known && !meets(pin, l, term) {
		return ""
	}
	return pin
}

// meets reports whether a node of that name and labels meets every
// requirement of a term (its fields too).
func meets(name string, labels map[string]string, term *v1.NodeSelectorTerm) bool {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	ok, err := corev1helpers.MatchNodeSelectorTerms(node, &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{*term}})
	return ok && err == nil
}
