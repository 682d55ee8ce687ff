package sim

import (
	"math/rand"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

// TestGeneratedAffinitiesHaveEveryShape: the affinity-pv move's generator
// draws every shape design.md's "A volume's node" tells apart, the awkward
// ones included, within 2,000 draws.
func TestGeneratedAffinitiesHaveEveryShape(t *testing.T) {
	w := &World{rng: rand.New(rand.NewSource(1))}
	var shapes []string
	seen := map[string]bool{}
	for range 2000 {
		s := affinityShape(genAffinity(w))
		if !seen[s] {
			seen[s] = true
			shapes = append(shapes, s)
		}
	}
	sort.Strings(shapes)
	want := []string{
		"pins a node (driver key, 1 terms)", "pins a node (driver key, 2 terms)",
		"pins a node (hostname alias, 1 terms)", "pins a node (hostname alias, 2 terms)",
		"zone or rack", "several values", "no such node", "not In", "terms",
	}
	for _, part := range want {
		found := false
		for _, s := range shapes {
			found = found || strings.Contains(s, part)
		}
		if !found {
			t.Errorf("no generated affinity is %q; drawn: %q", part, shapes)
		}
	}
	t.Logf("%d shapes: %q", len(shapes), shapes)
}

// TestPinOfAgreesWithPinned: the simulator's reading of what an affinity
// pins and pkg/nodeloss's (the binder's, given what it saw of the fixed
// nodes) agree on every generated affinity: two writings of design.md's
// rule, so that a check does not pass by repeating the code it judges.
func TestPinOfAgreesWithPinned(t *testing.T) {
	w := &World{rng: rand.New(rand.NewSource(2))}
	pinned := 0
	for range 5000 {
		pv := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{NodeAffinity: genAffinity(w)}}
		want := pinOf(pv)
		got := nodeloss.Pinned(pv, nodeNamed, func(n string) (map[string]string, bool) { return nodeLabels(n), true })
		if got != want {
			t.Fatalf("%s: nodeloss.Pinned says %q, the simulator %q", describeAffinity(pv.Spec.NodeAffinity), got, want)
		}
		if want != "" {
			pinned++
		}
	}
	if pinned < 500 {
		t.Errorf("only %d of 5,000 generated affinities pin a node", pinned)
	}
}
