package provisioner

import (
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
)

// topology gathers the segments the requirement is built from.
func (p *Provisioner) topology(claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass, node *v1.Node) (*csi.TopologyRequirement, error) {
	in := request.TopologyInput{Allowed: class.AllowedTopologies, ClaimName: claim.Name,
		Strict: p.o.StrictTopology, Immediate: p.o.ImmediateTopology}
	driver := p.o.Driver.DriverName()
	// nodeKeys: the selected node's registered keys (nil without one).
	var nodeKeys []string
	if node != nil {
		// A node that is gone, or that cannot run the driver, cannot take
		// the volume: the scheduler must pick again (SelectedNodes lets
		// the library hand us a node that is gone).
		if _, err := p.o.Nodes.Get(node.Name); apierrors.IsNotFound(err) {
			return nil, &rescheduleError{fmt.Errorf("the selected node %s is gone", node.Name)}
		}
		cn, err := p.o.CSINodes.Get(node.Name)
		if apierrors.IsNotFound(err) {
			return nil, &rescheduleError{fmt.Errorf("the selected node %s has no CSINode", node.Name)}
		} else if err != nil {
			return nil, fmt.Errorf("CSINode of the selected node %s: %w", node.Name, err)
		}
		keys, ok := driverKeys(cn, driver)
		if !ok {
			return nil, &rescheduleError{fmt.Errorf("the driver %s is not registered on the selected node %s", driver, node.Name)}
		}
		nodeKeys = append([]string{}, keys...)
		if in.Node, err = request.NodeSegment(node, keys); err != nil {
			return nil, err
		}
		if in.Strict {
			return request.Requirement(in)
		}
	} else if !in.Immediate && len(in.Allowed) == 0 {
		return nil, nil
	}
	csiNodes, err := p.o.CSINodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var registered []request.RegisteredNode
	for _, cn := range csiNodes {
		keys, ok := driverKeys(cn, driver)
		if !ok || len(keys) == 0 {
			continue
		}
		n, err := p.o.Nodes.Get(cn.Name)
		if err != nil {
			continue // a node being removed
		}
		registered = append(registered, request.RegisteredNode{Name: n.Name, Keys: keys, Labels: n.Labels})
	}
	// As EP v6.4.0: a selected node's key set alone, else every key set
	// registered, each from the nodes that registered it.
	var keySets [][]string
	in.Cluster, keySets = request.ClusterSegments(registered, nodeKeys)
	if node == nil && len(in.Allowed) == 0 && len(keySets) > 0 && len(in.Cluster) == 0 {
		// As EP: the driver registered topology keys, and no node has
		// them as labels: no requirement would let the volume land on a
		// node that cannot reach it.
		return nil, fmt.Errorf("the topology keys %v the driver registered are on no node's labels", keySets)
	}
	return request.Requirement(in)
}

// driverKeys are the topology keys a CSINode registers for the driver;
// false when the driver is not on it.
func driverKeys(cn *storagev1.CSINode, driver string) ([]string, bool) {
	i := slices.IndexFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
	if i < 0 {
		return nil, false
	}
	return cn.Spec.Drivers[i].TopologyKeys, true
}
