package request

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const zone, rack, host = "topology.example.com/zone", "topology.example.com/rack", "topology.example.com/host"

// checkRequirement checks the CSI rules every requirement must keep: no
// empty segment, no duplicate, and preferred a reordering of requisite (so
// a subset of it).
func checkRequirement(t *testing.T, r *csi.TopologyRequirement) {
	t.Helper()
	req, pref := segments(r.GetRequisite()), segments(r.GetPreferred())
	if len(req) == 0 {
		t.Errorf("a requirement without requisite segments: %v", r)
	}
	seen := map[string]bool{}
	for _, s := range req {
		if len(s) == 0 {
			t.Errorf("empty requisite segment in %v", r)
		}
		if seen[s.key()] {
			t.Errorf("duplicate requisite segment %v", s)
		}
		seen[s.key()] = true
	}
	if len(pref) != len(req) {
		t.Errorf("preferred %v is not a reordering of requisite %v", pref, req)
	}
	for _, s := range pref {
		if !seen[s.key()] {
			t.Errorf("preferred segment %v is not requisite (requisite %v)", s, req)
		}
	}
}

func TestRequirementWithNode(t *testing.T) {
	a, b, c := seg(zone, "a"), seg(zone, "b"), seg(zone, "c")
	tests := []struct {
		name          string
		in            TopologyInput
		wantRequisite []Segment
		wantPreferred []Segment
		wantErr       string
	}{
		{name: "strict: only the node's segment",
			in:            TopologyInput{Node: seg(zone, "b", rack, "1"), Strict: true, Cluster: []Segment{a, c}},
			wantRequisite: []Segment{seg(zone, "b", rack, "1")}, wantPreferred: []Segment{seg(zone, "b", rack, "1")}},
		{name: "strict within allowedTopologies",
			in:            TopologyInput{Node: seg(zone, "b", rack, "1"), Strict: true, Allowed: []v1.TopologySelectorTerm{term(expr(zone, "a", "b"))}},
			wantRequisite: []Segment{seg(zone, "b", rack, "1")}, wantPreferred: []Segment{seg(zone, "b", rack, "1")}},
		{name: "strict outside allowedTopologies",
			in:      TopologyInput{Node: seg(zone, "c"), Strict: true, Allowed: []v1.TopologySelectorTerm{term(expr(zone, "a", "b"))}},
			wantErr: "outside the class's allowedTopologies"},
		{name: "non-strict: node and cluster, deduplicated and sorted; node first in preferred",
			in:            TopologyInput{Node: b, Cluster: []Segment{c, a, b, a, {}}},
			wantRequisite: []Segment{a, b, c}, wantPreferred: []Segment{b, a, c}},
		{name: "non-strict: node alone",
			in:            TopologyInput{Node: b},
			wantRequisite: []Segment{b}, wantPreferred: []Segment{b}},
		{name: "non-strict: node not in the cluster list yet",
			in:            TopologyInput{Node: c, Cluster: []Segment{a, b}},
			wantRequisite: []Segment{a, b, c}, wantPreferred: []Segment{c, a, b}},
		{name: "non-strict, immediate flag does not matter with a node",
			in:            TopologyInput{Node: a, Cluster: []Segment{b}, Immediate: true, ClaimName: "x"},
			wantRequisite: []Segment{a, b}, wantPreferred: []Segment{a, b}},
		{name: "allowedTopologies: cartesian product of values",
			in: TopologyInput{Node: seg(zone, "b", rack, "2"), Cluster: []Segment{seg(zone, "z", rack, "9")},
				Allowed: []v1.TopologySelectorTerm{term(expr(zone, "a", "b"), expr(rack, "1", "2"))}},
			wantRequisite: []Segment{seg(rack, "1", zone, "a"), seg(rack, "1", zone, "b"), seg(rack, "2", zone, "a"), seg(rack, "2", zone, "b")},
			wantPreferred: []Segment{seg(rack, "2", zone, "b"), seg(rack, "1", zone, "a"), seg(rack, "1", zone, "b"), seg(rack, "2", zone, "a")}},
		{name: "allowedTopologies with fewer keys than the node's",
			in:            TopologyInput{Node: seg(zone, "b", host, "n1"), Allowed: []v1.TopologySelectorTerm{term(expr(zone, "a", "b", "c"))}},
			wantRequisite: []Segment{a, b, c}, wantPreferred: []Segment{b, a, c}},
		{name: "several allowed segments hold the node: all of them first",
			in: TopologyInput{Node: seg(zone, "b", host, "n1"), Allowed: []v1.TopologySelectorTerm{
				term(expr(zone, "c")), term(expr(host, "n1")), term(expr(zone, "b")), term(expr(host, "n2"))}},
			wantRequisite: []Segment{seg(host, "n1"), seg(host, "n2"), b, c},
			wantPreferred: []Segment{seg(host, "n1"), b, seg(host, "n2"), c}},
		{name: "node outside allowedTopologies",
			in:      TopologyInput{Node: seg(zone, "d"), Allowed: []v1.TopologySelectorTerm{term(expr(zone, "a", "b"))}},
			wantErr: "outside the class's allowedTopologies"},
		{name: "node missing an allowed key",
			in:      TopologyInput{Node: seg(host, "n1"), Allowed: []v1.TopologySelectorTerm{term(expr(zone, "a"))}},
			wantErr: "outside the class's allowedTopologies"},
		{name: "empty allowed terms are no restriction",
			in:            TopologyInput{Node: b, Cluster: []Segment{a}, Allowed: []v1.TopologySelectorTerm{{}}},
			wantRequisite: []Segment{a, b}, wantPreferred: []Segment{b, a}},
		{name: "node with an empty segment, strict", in: TopologyInput{Node: Segment{}, Strict: true, Cluster: []Segment{a}},
			wantErr: "no topology segment"},
		{name: "node with an empty segment, non-strict", in: TopologyInput{Node: Segment{}, Cluster: []Segment{a}},
			wantErr: "no topology segment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := maps.Clone(tt.in.Node)
			got, err := Requirement(tt.in)
			if !maps.Equal(node, tt.in.Node) {
				t.Errorf("the node's segment was changed: %v", tt.in.Node)
			}
			if !checkErr(t, err, tt.wantErr) {
				if got != nil {
					t.Errorf("a requirement with an error: %v", got)
				}
				return
			}
			checkRequirement(t, got)
			if req := segments(got.Requisite); !segmentsEqual(req, tt.wantRequisite) {
				t.Errorf("requisite %v, want %v", req, tt.wantRequisite)
			}
			pref := segments(got.Preferred)
			if !segmentsEqual(pref, tt.wantPreferred) {
				t.Errorf("preferred %v, want %v", pref, tt.wantPreferred)
			}
			if len(pref) > 0 && !tt.in.Node.within(pref[0]) {
				t.Errorf("the first preferred segment %v does not hold the node %v", pref[0], tt.in.Node)
			}
		})
	}
}

func TestRequirementImmediate(t *testing.T) {
	a, b, c := seg(zone, "a"), seg(zone, "b"), seg(zone, "c")
	tests := []struct {
		name          string
		in            TopologyInput
		wantRequisite []Segment // nil: no requirement
	}{
		{name: "immediate topology off, no allowedTopologies", in: TopologyInput{Cluster: []Segment{a, b}}},
		{name: "immediate topology off: the class's allowedTopologies still go, as EP sends them",
			in: TopologyInput{ClaimName: "data", Cluster: []Segment{a, b}, Allowed: []v1.TopologySelectorTerm{term(expr(zone, "a"))}}, wantRequisite: []Segment{a}},
		{name: "no segments at all", in: TopologyInput{Immediate: true, ClaimName: "data"}},
		{name: "only empty segments", in: TopologyInput{Immediate: true, ClaimName: "data", Cluster: []Segment{{}, {}}}},
		{name: "cluster segments", in: TopologyInput{Immediate: true, ClaimName: "data", Cluster: []Segment{c, {}, a, b, a}},
			wantRequisite: []Segment{a, b, c}},
		{name: "allowedTopologies win over the cluster",
			in:            TopologyInput{Immediate: true, ClaimName: "data", Cluster: []Segment{a}, Allowed: []v1.TopologySelectorTerm{term(expr(zone, "c", "b"))}},
			wantRequisite: []Segment{b, c}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Requirement(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantRequisite == nil {
				if got != nil {
					t.Errorf("got %v, want no requirement", got)
				}
				return
			}
			checkRequirement(t, got)
			if req := segments(got.Requisite); !segmentsEqual(req, tt.wantRequisite) {
				t.Errorf("requisite %v, want %v", req, tt.wantRequisite)
			}
			if !isRotation(segments(got.Preferred), tt.wantRequisite) {
				t.Errorf("preferred %v is not a rotation of %v", segments(got.Preferred), tt.wantRequisite)
			}
		})
	}
}

func isRotation(got, of []Segment) bool {
	for i := range of {
		if segmentsEqual(got, append(slices.Clone(of[i:]), of[:i]...)) {
			return true
		}
	}
	return len(got) == 0 && len(of) == 0
}

func TestRequirementImmediateSpread(t *testing.T) {
	cluster := []Segment{seg(zone, "a"), seg(zone, "b"), seg(zone, "c"), seg(zone, "d")}
	firsts := map[string]bool{}
	for i := range 40 {
		in := TopologyInput{Immediate: true, ClaimName: fmt.Sprintf("claim-%d", i), Cluster: cluster}
		r1, err := Requirement(in)
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(in.Cluster) // the order the cluster is listed in does not matter
		r2, _ := Requirement(in)
		if !segmentsEqual(segments(r1.Preferred), segments(r2.Preferred)) {
			t.Fatalf("%s: preferred %v then %v", in.ClaimName, segments(r1.Preferred), segments(r2.Preferred))
		}
		if !isRotation(segments(r1.Preferred), segments(r1.Requisite)) {
			t.Fatalf("%s: preferred %v is not a rotation of requisite %v", in.ClaimName, segments(r1.Preferred), segments(r1.Requisite))
		}
		firsts[r1.Preferred[0].Segments[zone]] = true
	}
	if len(firsts) < 3 {
		t.Errorf("40 claims start at only %d of 4 segments: %v", len(firsts), firsts)
	}
}

func TestExpandTerms(t *testing.T) {
	tests := []struct {
		name  string
		terms []v1.TopologySelectorTerm
		want  []Segment
	}{
		{name: "none"},
		{name: "one key, several values", terms: []v1.TopologySelectorTerm{term(expr(zone, "b", "a"))},
			want: []Segment{seg(zone, "a"), seg(zone, "b")}},
		{name: "product of two keys", terms: []v1.TopologySelectorTerm{term(expr(zone, "a", "b"), expr(rack, "1", "2", "3"))},
			want: []Segment{
				seg(rack, "1", zone, "a"), seg(rack, "1", zone, "b"), seg(rack, "2", zone, "a"),
				seg(rack, "2", zone, "b"), seg(rack, "3", zone, "a"), seg(rack, "3", zone, "b")}},
		{name: "terms are a union, deduplicated", terms: []v1.TopologySelectorTerm{term(expr(zone, "a")), term(expr(zone, "a", "c"))},
			want: []Segment{seg(zone, "a"), seg(zone, "c")}},
		{name: "a term without expressions is skipped", terms: []v1.TopologySelectorTerm{{}, term(expr(zone, "a"))},
			want: []Segment{seg(zone, "a")}},
		{name: "an expression without values matches nothing", terms: []v1.TopologySelectorTerm{term(expr(zone), expr(rack, "1")), term(expr(zone, "a"))},
			want: []Segment{seg(zone, "a")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := expandTerms(tt.terms); !segmentsEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNodeSegment(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: kv(zone, "a", rack, "1", "other", "x", host, "")}}
	tests := []struct {
		name    string
		keys    []string
		want    Segment
		wantErr string
	}{
		{name: "no keys", keys: nil, want: Segment{}},
		{name: "some keys", keys: []string{zone, rack}, want: seg(zone, "a", rack, "1")},
		{name: "an empty label value counts", keys: []string{host}, want: seg(host, "")},
		{name: "missing label", keys: []string{zone, "topology.example.com/region"},
			wantErr: "node n1 has no label topology.example.com/region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NodeSegment(node, tt.keys)
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if !maps.Equal(got, tt.want) || got == nil {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
