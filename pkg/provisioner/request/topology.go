package request

import (
	"errors"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Segment is one topology segment: key to value.
type Segment map[string]string

func (s Segment) key() string {
	keys := slices.Sorted(maps.Keys(s))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + s[k] + ";")
	}
	return b.String()
}

// within reports whether s lies in allowed: s has every key of allowed with
// the same value.
func (s Segment) within(allowed Segment) bool {
	for k, v := range allowed {
		if s[k] != v {
			return false
		}
	}
	return true
}

// TopologyInput is what the accessibility requirement is built from.
type TopologyInput struct {
	// Node is the selected node's segment, nil when no node is selected.
	Node Segment
	// Cluster are the segments of every node that runs the driver.
	Cluster []Segment
	// Allowed are the class's allowedTopologies.
	Allowed []v1.TopologySelectorTerm
	// ClaimName spreads Immediate volumes over the segments.
	ClaimName string
	// Strict keeps a delayed volume to the selected node's segment
	// (--strict-topology); Immediate asks for topology for Immediate
	// classes at all (--immediate-topology).
	Strict, Immediate bool
}

// Requirement builds the CreateVolume accessibility requirement, nil for none.
//   - With a selected node: strict gives only the node's segment; otherwise
//     every allowed (or known) segment is requisite and the node's comes
//     first in preferred. A node outside allowedTopologies is an error.
//   - Without one (Immediate): the allowed (or known) segments, preferred
//     in an order that depends on the claim, so volumes spread out.
func Requirement(in TopologyInput) (*csi.TopologyRequirement, error) {
	allowed := expandTerms(in.Allowed)
	if in.Node != nil {
		if len(in.Node) == 0 {
			// As external-provisioner: the driver has not registered its
			// topology on the node (yet); an empty segment is no requirement.
			return nil, errors.New("the selected node has no topology segment: its CSINode lists no topology keys for the driver")
		}
		if len(allowed) > 0 && !slices.ContainsFunc(allowed, in.Node.within) {
			return nil, errors.New("the selected node is outside the class's allowedTopologies")
		}
		if in.Strict {
			return &csi.TopologyRequirement{Requisite: toCSI([]Segment{in.Node}), Preferred: toCSI([]Segment{in.Node})}, nil
		}
		req := allowed
		if len(req) == 0 {
			req = dedup(append([]Segment{in.Node}, in.Cluster...))
		}
		// Preferred must be a subset of requisite: the segments that hold
		// the node first, then the rest.
		var pref, rest []Segment
		for _, s := range req {
			if in.Node.within(s) {
				pref = append(pref, s)
			} else {
				rest = append(rest, s)
			}
		}
		pref = append(pref, rest...)
		return &csi.TopologyRequirement{Requisite: toCSI(req), Preferred: toCSI(pref)}, nil
	}
	if !in.Immediate && len(allowed) == 0 {
		// As EP: with --immediate-topology=false only the class's
		// allowedTopologies limit where an Immediate volume goes.
		return nil, nil
	}
	req := allowed
	if len(req) == 0 {
		req = dedup(in.Cluster)
	}
	if len(req) == 0 {
		return nil, nil
	}
	h := fnv.New32a()
	h.Write([]byte(in.ClaimName))
	start := int(h.Sum32() % uint32(len(req)))
	pref := append(slices.Clone(req[start:]), req[:start]...)
	return &csi.TopologyRequirement{Requisite: toCSI(req), Preferred: toCSI(pref)}, nil
}

// expandTerms turns selector terms into segments: each term is the product
// of its expressions' values.
func expandTerms(terms []v1.TopologySelectorTerm) []Segment {
	var out []Segment
	for _, t := range terms {
		segs := []Segment{{}}
		for _, e := range t.MatchLabelExpressions {
			var next []Segment
			for _, s := range segs {
				for _, v := range e.Values {
					n := maps.Clone(s)
					n[e.Key] = v
					next = append(next, n)
				}
			}
			segs = next
		}
		if len(segs) == 1 && len(segs[0]) == 0 {
			continue
		}
		out = append(out, segs...)
	}
	return dedup(out)
}

func dedup(segs []Segment) []Segment {
	seen := map[string]bool{}
	var out []Segment
	for _, s := range segs {
		if len(s) == 0 || seen[s.key()] {
			continue
		}
		seen[s.key()] = true
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Segment) int { return strings.Compare(a.key(), b.key()) })
	return out
}

func toCSI(segs []Segment) []*csi.Topology {
	out := make([]*csi.Topology, 0, len(segs))
	for _, s := range segs {
		out = append(out, &csi.Topology{Segments: maps.Clone(s)})
	}
	return out
}

// NodeSegment reads a node's segment for the given topology keys (from the
// driver's entry in the node's CSINode). A missing label is an error.
func NodeSegment(node *v1.Node, keys []string) (Segment, error) {
	s := Segment{}
	for _, k := range keys {
		v, ok := node.Labels[k]
		if !ok {
			return nil, errors.New("node " + node.Name + " has no label " + k + ", which its CSINode names as a topology key")
		}
		s[k] = v
	}
	return s, nil
}

// RegisteredNode is a node as topology sees it: the topology keys its
// CSINode registers for the driver, and the node's labels.
type RegisteredNode struct {
	Name   string
	Keys   []string
	Labels map[string]string
}

// ClusterSegments are the cluster's segments for a requirement, as
// external-provisioner v6.4.0 aggregates them: for each key set (keys, the
// selected node's; or, for nil, every distinct key set the nodes
// registered), one segment from each node whose registered keys include
// the whole set and that has a label for each of them. A node is never
// counted under keys it did not register, whatever its labels, and nodes
// that register different key sets (region here, region and zone there)
// each give the granularity they registered. keySets are the key sets
// aggregated. Pure; the segments are deduplicated and sorted.
func ClusterSegments(nodes []RegisteredNode, keys []string) (segs []Segment, keySets [][]string) {
	if keys != nil {
		keySets = [][]string{slices.Sorted(slices.Values(keys))}
	} else {
		seen := map[string]bool{}
		for _, n := range nodes {
			if len(n.Keys) == 0 {
				continue
			}
			set := slices.Compact(slices.Sorted(slices.Values(n.Keys)))
			if id := strings.Join(set, "\x00"); !seen[id] {
				seen[id] = true
				keySets = append(keySets, set)
			}
		}
		slices.SortFunc(keySets, slices.Compare)
	}
	for _, set := range keySets {
		for _, n := range nodes {
			if !containsAll(n.Keys, set) {
				continue
			}
			if seg, err := NodeSegment(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}, set); err == nil {
				segs = append(segs, seg)
			}
		}
	}
	return dedup(segs), keySets
}

func containsAll(have, want []string) bool {
	for _, k := range want {
		if !slices.Contains(have, k) {
			return false
		}
	}
	return true
}
