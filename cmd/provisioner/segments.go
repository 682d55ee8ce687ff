package main

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// segmentsFunc lists the topology segments to publish capacity for: this
// node's in node-deployment mode, else every node's that runs the driver.
func segmentsFunc(driver string, node *provisioner.NodeDeployment, csiNodes storagelisters.CSINodeLister, nodes corelisters.NodeLister) func() ([]map[string]string, error) {
	return func() ([]map[string]string, error) {
		var list []*storagev1.CSINode
		if node != nil {
			cn, err := csiNodes.Get(node.NodeName)
			if err != nil {
				return nil, fmt.Errorf("the CSINode of %s: %w", node.NodeName, err)
			}
			list = []*storagev1.CSINode{cn}
		} else {
			var err error
			if list, err = csiNodes.List(labels.Everything()); err != nil {
				return nil, err
			}
		}
		seen := map[string]bool{}
		var out []map[string]string
		for _, cn := range list {
			i := slices.IndexFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
			if i < 0 || len(cn.Spec.Drivers[i].TopologyKeys) == 0 {
				continue
			}
			n, err := nodes.Get(cn.Name)
			if err != nil {
				continue
			}
			seg, err := request.NodeSegment(n, cn.Spec.Drivers[i].TopologyKeys)
			if err != nil {
				continue
			}
			if k := fmt.Sprint(seg); !seen[k] {
				seen[k] = true
				out = append(out, seg)
			}
		}
		return out, nil
	}
}

// topologyLabelHandler asks for a capacity refresh when a node that runs
// the driver gains, loses or changes one of its topology labels. Kubelet
// writes those labels and the CSINode entry in two requests, and the two
// informers may deliver them in either order: when the CSINode comes
// first, segmentsFunc skips the node (no label yet), and without this the
// node's first objects would wait for the next poll.
func topologyLabelHandler(driver string, csiNodes storagelisters.CSINodeLister, trigger func()) cache.ResourceEventHandler {
	keysOf := func(node string) []string {
		cn, err := csiNodes.Get(node)
		if err != nil {
			return nil
		}
		i := slices.IndexFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
		if i < 0 {
			return nil
		}
		return cn.Spec.Drivers[i].TopologyKeys
	}
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			a, okA := old.(*corev1.Node)
			b, okB := obj.(*corev1.Node)
			if okA && okB && topologyChanged(a.Labels, b.Labels, keysOf(b.Name)) {
				trigger()
			}
		},
	}
}

// topologyChanged reports whether any of keys differs between two label
// sets (present in one only, or with another value).
func topologyChanged(old, cur map[string]string, keys []string) bool {
	for _, k := range keys {
		a, hadIt := old[k]
		b, hasIt := cur[k]
		if hadIt != hasIt || a != b {
			return true
		}
	}
	return false
}
