package request

import (
	"reflect"
	"testing"
)

func TestClusterSegments(t *testing.T) {
	// fine registers region and zone; coarse only region; labelled has
	// the labels but registers no keys; unlabelled registers zone without
	// the label.
	fine := RegisteredNode{Name: "fine", Keys: []string{zone, region}, Labels: kv(region, "r1", zone, "z1")}
	coarse := RegisteredNode{Name: "coarse", Keys: []string{region}, Labels: kv(region, "r2", zone, "z9")}
	labelled := RegisteredNode{Name: "labelled", Labels: kv(region, "r3", zone, "z3")}
	unlabelled := RegisteredNode{Name: "unlabelled", Keys: []string{zone}, Labels: kv(region, "r4")}
	other := RegisteredNode{Name: "other", Keys: []string{region, zone}, Labels: kv(region, "r1", zone, "z2")}
	tests := []struct {
		name        string
		nodes       []RegisteredNode
		keys        []string
		want        []Segment
		wantKeySets [][]string
	}{
		{name: "no node registered keys", nodes: []RegisteredNode{labelled}},
		{name: "one key set", nodes: []RegisteredNode{fine, other},
			want: []Segment{seg(region, "r1", zone, "z1"), seg(region, "r1", zone, "z2")}, wantKeySets: [][]string{{region, zone}}},
		{name: "a node that registered no keys is left out, whatever its labels", nodes: []RegisteredNode{coarse, labelled},
			want: []Segment{seg(region, "r2")}, wantKeySets: [][]string{{region}}},
		{name: "a node without the label of a key it registered is left out", nodes: []RegisteredNode{coarse, unlabelled},
			want: []Segment{seg(region, "r2")}, wantKeySets: [][]string{{region}, {zone}}},
		{name: "immediate, mixed granularities: each key set from the nodes that registered it", nodes: []RegisteredNode{fine, coarse},
			want:        []Segment{seg(region, "r1"), seg(region, "r1", zone, "z1"), seg(region, "r2")},
			wantKeySets: [][]string{{region}, {region, zone}}},
		{name: "the selected node's keys: a node that did not register them all is left out, whatever its labels",
			nodes: []RegisteredNode{fine, coarse, other}, keys: []string{zone, region},
			want: []Segment{seg(region, "r1", zone, "z1"), seg(region, "r1", zone, "z2")}, wantKeySets: [][]string{{region, zone}}},
		{name: "the selected node's coarser keys: finer nodes count at that granularity",
			nodes: []RegisteredNode{fine, coarse}, keys: []string{region},
			want: []Segment{seg(region, "r1"), seg(region, "r2")}, wantKeySets: [][]string{{region}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, sets := ClusterSegments(tt.nodes, tt.keys)
			if !segmentsEqual(got, tt.want) {
				t.Errorf("segments %v, want %v", got, tt.want)
			}
			if !reflect.DeepEqual(sets, tt.wantKeySets) {
				t.Errorf("key sets %v, want %v", sets, tt.wantKeySets)
			}
		})
	}
}
