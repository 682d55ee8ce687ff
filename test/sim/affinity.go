package sim

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// Generated node affinities (writers.go: an admin's PV, spec.nodeAffinity),
// and the simulator's own reading of what one pins (design.md, "A
// volume's node"), written apart from pkg/nodeloss so that the checks do
// not move with its mutants.

// rackKey is a label both fixed nodes carry with one value: a rack of two.
const rackKey = "topology.sim.tether.dev/rack"

// hostnameOf is a fixed node's kubernetes.io/hostname label: node-1's is
// its name, node-2's another word (as on clouds where they differ).
func hostnameOf(node string) string {
	if node == "node-2" {
		return "host-2"
	}
	return node
}

// nodeLabels are a fixed node's labels, the same each time it registers.
func nodeLabels(node string) map[string]string {
	return map[string]string{topologyKey: node, zoneKey: zoneOf(node), v1.LabelHostname: hostnameOf(node), rackKey: "rack-1"}
}

// affinityValues is the domain of each key a generated requirement uses:
// the fixed nodes' values, and the awkward ones (a node that never was,
// a node's name under the hostname key where its hostname differs).
var affinityValues = map[string][]string{
	topologyKey:      {"node-1", "node-2", "node-9"},
	v1.LabelHostname: {"node-1", "host-2", "node-2", "host-9"},
	zoneKey:          {"zone-a", "zone-b"},
	rackKey:          {"rack-1"},
}

var affinityKeys = []string{topologyKey, v1.LabelHostname, zoneKey, rackKey}

// genAffinity draws a required node affinity from NodeSelector's grammar:
// one or two terms of one or two requirements (half the terms begin with a
// node's own: the driver's key or the hostname, In, one value), each a key
// of affinityKeys, an operator (In most often, NotIn, Exists) and one or two
// values of the key's domain. It yields node-local volumes (by the
// driver's key or the hostname, also in two terms), zones, racks, several
// hosts in one requirement, terms that pin different nodes, a node that
// never was; affinityShape names what it drew.
func genAffinity(w *World) *v1.VolumeNodeAffinity {
	terms := make([]v1.NodeSelectorTerm, 1+w.rng.Intn(2))
	for i := range terms {
		reqs := make([]v1.NodeSelectorRequirement, 1+w.rng.Intn(2))
		for j := range reqs {
			if j == 0 && w.rng.Intn(2) == 0 {
				// Half the terms start as a node's own would: by the
				// driver's key or the hostname, one value.
				key := pick(w, affinityKeys[:2])
				reqs[j] = v1.NodeSelectorRequirement{Key: key, Operator: v1.NodeSelectorOpIn, Values: []string{pick(w, affinityValues[key])}}
				continue
			}
			key := pick(w, affinityKeys)
			req := v1.NodeSelectorRequirement{Key: key, Operator: v1.NodeSelectorOpIn}
			switch w.rng.Intn(6) {
			case 0:
				req.Operator = v1.NodeSelectorOpNotIn
			case 1:
				req.Operator = v1.NodeSelectorOpExists
			}
			if req.Operator != v1.NodeSelectorOpExists {
				domain := affinityValues[key]
				req.Values = []string{pick(w, domain)}
				if w.rng.Intn(4) == 0 {
					if v := pick(w, domain); v != req.Values[0] {
						req.Values = append(req.Values, v)
					}
				}
			}
			reqs[j] = req
		}
		terms[i] = v1.NodeSelectorTerm{MatchExpressions: reqs}
	}
	return &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: terms}}
}

// pinOf is the fixed node a PV's required affinity pins, or "", as
// design.md defines it: every term has a requirement "<key> In [v]" with
// one value, v names a node (its name, which carries key=v; or its
// hostname label under kubernetes.io/hostname), the same in every term,
// no term names two, and the node meets every term (a term that asks for
// two hosts, or a zone the node is not in, admits none). Only node-1 and node-2 are ever pinned: the
// autoscaler's nodes carry a zone alone.
func pinOf(pv *v1.PersistentVolume) string { return pinOfWith(pv, nodeNamed) }

// pinOfWith is pinOf where names says which fixed node (key, value) names.
func pinOfWith(pv *v1.PersistentVolume, names func(key, value string) string) string {
	if pv == nil || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	pinned := ""
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		named := map[string]bool{}
		for _, req := range term.MatchExpressions {
			if req.Operator == v1.NodeSelectorOpIn && len(req.Values) == 1 {
				if n := names(req.Key, req.Values[0]); n != "" {
					named[n] = true
				}
			}
		}
		if len(named) != 1 {
			return ""
		}
		for n := range named {
			if pinned != "" && pinned != n || !termAdmits(term, n) {
				return ""
			}
			pinned = n
		}
	}
	return pinned
}

// termAdmits reports whether a fixed node meets one term.
func termAdmits(term v1.NodeSelectorTerm, node string) bool {
	pv := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{NodeAffinity: &v1.VolumeNodeAffinity{
		Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{term}}}}}
	return storagehelpers.CheckNodeAffinity(pv, nodeLabels(node)) == nil
}

// nodeNamed is the fixed node (key, value) names, or "".
func nodeNamed(key, value string) string {
	for _, n := range nodeNames {
		labels := nodeLabels(n)
		if value == n && labels[key] == value || key == v1.LabelHostname && labels[key] == value {
			return n
		}
	}
	return ""
}

// affinityShape names what a generated affinity is, for the run's
// summary and TestGeneratedAffinitiesHaveEveryShape.
func affinityShape(a *v1.VolumeNodeAffinity) string {
	pv := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{NodeAffinity: a}}
	terms := a.Required.NodeSelectorTerms
	if n := pinOf(pv); n != "" {
		via := "driver key"
		for _, t := range terms {
			for _, r := range t.MatchExpressions {
				if r.Key == v1.LabelHostname && r.Operator == v1.NodeSelectorOpIn && len(r.Values) == 1 && r.Values[0] != n {
					via = "hostname alias"
				}
			}
		}
		return fmt.Sprintf("pins a node (%s, %d terms)", via, len(terms))
	}
	var has []string
	for _, t := range terms {
		for _, r := range t.MatchExpressions {
			switch {
			case r.Operator != v1.NodeSelectorOpIn:
				has = append(has, "not In")
			case len(r.Values) > 1:
				has = append(has, "several values")
			case r.Key == zoneKey || r.Key == rackKey:
				has = append(has, "zone or rack")
			case nodeNamed(r.Key, r.Values[0]) == "":
				has = append(has, "no such node")
			default:
				has = append(has, "a node")
			}
		}
	}
	if len(terms) > 1 {
		has = append(has, "terms")
	}
	slices.Sort(has)
	return "pins none: " + strings.Join(slices.Compact(has), ", ")
}

// describeAffinity writes an affinity short: terms apart by " | ".
func describeAffinity(a *v1.VolumeNodeAffinity) string {
	var terms []string
	for _, t := range a.Required.NodeSelectorTerms {
		var reqs []string
		for _, r := range t.MatchExpressions {
			key := r.Key[strings.LastIndex(r.Key, "/")+1:]
			reqs = append(reqs, fmt.Sprintf("%s %s %v", key, r.Operator, r.Values))
		}
		terms = append(terms, strings.Join(reqs, ", "))
	}
	return strings.Join(terms, " | ")
}
