package provisioner

import (
	"testing"

	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The requirement of an Immediate claim on a cluster where nodes carry
// the topology labels without the driver registering the keys on them.
func TestImmediateTopologyFromRegisteredNodes(t *testing.T) {
	tests := []struct {
		name    string
		nodes   map[string][]string // node (labelled zone=<node>) to the keys its CSINode registers; nil: no CSINode
		want    []request.Segment
		wantErr string
	}{
		{name: "only the nodes that registered the key", nodes: map[string][]string{"a": {zone}, "b": {}, "c": nil},
			want: []request.Segment{seg(zone, "a")}},
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
			got, err := e.p.topologyRequirement(newClaim(), e.class, nil)
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

const zone, rack = "topology.example.com/zone", "topology.example.com/rack"
