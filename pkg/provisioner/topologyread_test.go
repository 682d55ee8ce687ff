package provisioner

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const region = "topology.example.com/region"

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

// The requirement of an Immediate claim on a cluster where nodes carry
// the topology labels without the driver registering the keys on them.
func TestImmediateTopologyFromRegisteredNodes(t *testing.T) {
	tests := []struct {
		name    string
		nodes   map[string][]string // node (labelled zone=<node>) to the keys its CSINode registers; nil: no CSINode
		want    []Segment
		wantErr string
	}{
		{name: "only the nodes that registered the key", nodes: map[string][]string{"a": {zone}, "b": {}, "c": nil},
			want: []Segment{seg(zone, "a")}},
		{name: "no node registered keys: no requirement", nodes: map[string][]string{"a": {}, "b": nil}},
		{name: "keys registered, on no node's labels: an error, as EP", nodes: map[string][]string{"a": {rack}},
			wantErr: "are on no node's labels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.Topology, o.ImmediateTopology = true, true })
			for name, keys := range tt.nodes {
				if err := e.nodes.Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: kv(zone, name)}}); err != nil {
					t.Fatal(err)
				}
				if keys == nil {
					continue
				}
				if err := e.csiNodes.Add(&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driverNm, NodeID: name, TopologyKeys: keys}}}}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := e.p.topology(newClaim(), e.class, nil)
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if tt.want == nil {
				if got != nil {
					t.Errorf("requirement %v, want none", got)
				}
				return
			}
			if req := segments(got.GetRequisite()); !segmentsEqual(req, tt.want) {
				t.Errorf("requisite %v, want %v", req, tt.want)
			}
		})
	}
}
