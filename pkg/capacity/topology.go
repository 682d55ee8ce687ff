package capacity

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// admits reports whether a class with these allowedTopologies may have
// volumes in segment, so that its CSIStorageCapacity object there can be
// of use. No term (or only terms without expressions, which the API
// server refuses) admits every segment. Otherwise some term must admit
// it: each of the term's expressions on a key of the segment must list the
// segment's value. An expression on a key the segment lacks rules nothing
// out: it is about node labels that are not the driver's topology keys
// (topology.kubernetes.io/zone beside the driver's own zone key), which
// the scheduler checks against the node itself, and some node of the
// segment may match it. (external-provisioner's open PR 1538 decides the
// same.)
func admits(terms []v1.TopologySelectorTerm, segment map[string]string) bool {
	some := false
	for _, t := range terms {
		if len(t.MatchLabelExpressions) == 0 {
			continue
		}
		some = true
		if termAdmits(t, segment) {
			return true
		}
	}
	return !some
}

func termAdmits(t v1.TopologySelectorTerm, segment map[string]string) bool {
	for _, e := range t.MatchLabelExpressions {
		if v, ok := segment[e.Key]; ok && !slices.Contains(e.Values, v) {
			return false
		}
	}
	return true
}
