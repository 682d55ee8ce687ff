package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
)

func TestTopologyChanged(t *testing.T) {
	keys := []string{"topology.local.csi.tether.dev/node"}
	for _, tc := range []struct {
		name     string
		old, cur map[string]string
		want     bool
	}{
		{"label added (kubelet registered the driver)", map[string]string{"a": "b"}, map[string]string{"a": "b", keys[0]: "n1"}, true},
		{"label removed", map[string]string{keys[0]: "n1"}, nil, true},
		{"label value changed", map[string]string{keys[0]: "n1"}, map[string]string{keys[0]: "n2"}, true},
		{"another label changed", map[string]string{keys[0]: "n1", "x": "1"}, map[string]string{keys[0]: "n1", "x": "2"}, false},
		{"nothing changed", map[string]string{keys[0]: "n1"}, map[string]string{keys[0]: "n1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := topologyChanged(tc.old, tc.cur, keys); got != tc.want {
				t.Errorf("topologyChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTopologyLabelHandler: the node's label arriving after its CSINode
// entry triggers a refresh; a node without the driver does not.
func TestTopologyLabelHandler(t *testing.T) {
	const driver, key = "local.csi.tether.dev", "topology.local.csi.tether.dev/node"
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = idx.Add(&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: "node-1", TopologyKeys: []string{key}}}}})
	triggers := 0
	h := topologyLabelHandler(driver, storagelisters.NewCSINodeLister(idx), func() { triggers++ })
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	h.OnUpdate(node("node-2", nil), node("node-2", map[string]string{key: "node-2"}))
	if triggers != 0 {
		t.Fatalf("a node without the driver's CSINode entry triggered %d refreshes", triggers)
	}
	h.OnUpdate(node("node-1", nil), node("node-1", map[string]string{key: "node-1"}))
	if triggers != 1 {
		t.Fatalf("the topology label of a node with the driver triggered %d refreshes, want 1", triggers)
	}
}
