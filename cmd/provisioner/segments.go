package main

import (
	"fmt"
	"slices"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"

	"github.com/tether-csi/tether/pkg/provisioner"
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
			seg, err := provisioner.NodeSegment(n, cn.Spec.Drivers[i].TopologyKeys)
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
