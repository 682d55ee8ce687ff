package binder

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

func pvPinned(terms ...[]v1.NodeSelectorRequirement) pvOpt {
	return func(pv *v1.PersistentVolume) {
		sel := &v1.NodeSelector{}
		for _, reqs := range terms {
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, v1.NodeSelectorTerm{MatchExpressions: reqs})
		}
		pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: sel}
	}
}

func inReq(key string, values ...string) v1.NodeSelectorRequirement {
	return v1.NodeSelectorRequirement{Key: key, Operator: v1.NodeSelectorOpIn, Values: values}
}

func names(pvs []*v1.PersistentVolume) []string {
	var out []string
	for _, pv := range pvs {
		out = append(out, pv.Name)
	}
	slices.Sort(out)
	return out
}

// TestIndexOfNode: a node's event finds the PVs that may be pinned to it
// or are marked for it, by name or hostname label, and no walk of all PVs;
// an update or a deletion files a PV again or takes it out.
func TestIndexOfNode(t *testing.T) {
	ix := NewIndex()
	ix.Upsert(newPV("host", "1Gi", pvPinned([]v1.NodeSelectorRequirement{inReq(v1.LabelHostname, "node-1")})))
	ix.Upsert(newPV("csi-key", "1Gi", pvPinned([]v1.NodeSelectorRequirement{inReq("zone", "a"), inReq("topology.example.com/node", "node-1.example.com")})))
	ix.Upsert(newPV("two-hosts", "1Gi", pvPinned([]v1.NodeSelectorRequirement{inReq(v1.LabelHostname, "node-1", "node-2")})))
	ix.Upsert(newPV("zonal", "1Gi", pvPinned([]v1.NodeSelectorRequirement{inReq("zone", "a")})))
	ix.Upsert(newPV("marked", "1Gi", pvAnn(nodeloss.AnnLostNode, "node-9")))
	ix.Upsert(newPV("plain", "1Gi"))
	tests := []struct {
		lookup []string
		want   []string
	}{
		{[]string{"node-1"}, []string{"host"}},
		{[]string{"node-1.example.com", "node-1"}, []string{"csi-key", "host"}},
		{[]string{"node-2"}, nil},
		{[]string{"a"}, []string{"csi-key", "zonal"}}, // filed by value: the caller's check says no node
		{[]string{"node-9"}, []string{"marked"}},
	}
	for _, tt := range tests {
		if got := names(ix.OfNode(tt.lookup...)); !slices.Equal(got, tt.want) {
			t.Errorf("OfNode(%v) = %v, want %v", tt.lookup, got, tt.want)
		}
	}
	moved := newPV("host", "1Gi", pvPinned([]v1.NodeSelectorRequirement{inReq(v1.LabelHostname, "node-3")}))
	moved.ResourceVersion = "2"
	ix.Upsert(moved)
	if got := names(ix.OfNode("node-1")); len(got) != 0 {
		t.Errorf("after the update, OfNode(node-1) = %v, want none", got)
	}
	if got := names(ix.OfNode("node-3")); !slices.Equal(got, []string{"host"}) {
		t.Errorf("after the update, OfNode(node-3) = %v, want [host]", got)
	}
	ix.Delete(moved)
	ix.Delete(newPV("marked", "1Gi", pvAnn(nodeloss.AnnLostNode, "node-9")))
	if got := names(ix.OfNode("node-3", "node-9")); len(got) != 0 {
		t.Errorf("after the deletions, OfNode = %v, want none", got)
	}
	if len(ix.byNode) != 2 { // "a" and "node-1.example.com"
		t.Errorf("byNode holds %d names, want 2: %v", len(ix.byNode), ix.byNode)
	}
}
