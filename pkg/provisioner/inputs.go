package provisioner

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/migration"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// The reads that gather a request's inputs (the class in its CSI form,
// the data source, the VolumeAttributesClass, secrets, topology), for a
// claim's first CreateVolume and for the clean-up's repeat of it; the
// translation itself is package request's.

// csiClass returns the CSI form of a claim's class: the class itself, or,
// for a class of the in-tree plugin this driver takes over, the class with
// its parameters translated (migrated is then true).
func (p *Provisioner) csiClass(ctx context.Context, class *storagev1.StorageClass) (*storagev1.StorageClass, bool, error) {
	if p.o.MigratedFrom == "" || class.Provisioner != p.o.MigratedFrom {
		return class, false, nil
	}
	csiClass, err := migration.TranslateClass(klog.FromContext(ctx), class)
	if err != nil {
		return nil, false, fmt.Errorf("translating the in-tree class %s for %s: %w", class.Name, p.o.Driver.DriverName(), err)
	}
	return csiClass, true, nil
}

// csiVolume returns the CSI form of a PV: the PV itself, or, for an in-tree
// PV migrated to this driver (pv.kubernetes.io/migrated-to), its
// translation.
func (p *Provisioner) csiVolume(ctx context.Context, pv *v1.PersistentVolume) (*v1.PersistentVolume, error) {
	if pv.Spec.CSI != nil || p.o.MigratedFrom == "" || pv.Annotations[storagehelpers.AnnMigratedTo] != p.o.Driver.DriverName() {
		return pv, nil
	}
	out, err := migration.ToCSI(klog.FromContext(ctx), pv)
	if err != nil {
		return nil, fmt.Errorf("translating the in-tree volume %s for %s: %w", pv.Name, p.o.Driver.DriverName(), err)
	}
	return out, nil
}

// mutableParameters reads the claim's VolumeAttributesClass, if it names
// one. A class that does not exist (yet) is an error, which the library
// retries with backoff, as external-provisioner does. The clean-up of a
// deleted claim goes on without a class that is gone: it only has to find
// the volume again.
func (p *Provisioner) mutableParameters(ctx context.Context, claim *v1.PersistentVolumeClaim, cleanUp bool) (map[string]string, error) {
	name := ptr.Deref(claim.Spec.VolumeAttributesClassName, "")
	if name == "" {
		return nil, nil
	}
	if p.o.VolumeAttributesClasses == nil {
		return nil, fmt.Errorf("the claim names the VolumeAttributesClass %s, and this provisioner does not read those", name)
	}
	vac, err := p.o.VolumeAttributesClasses.Get(name)
	if cleanUp && apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Info("The claim's VolumeAttributesClass is gone; repeating CreateVolume without its parameters",
			"pvc", klog.KObj(claim), "volumeAttributesClass", name)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the VolumeAttributesClass %s: %w", name, err)
	}
	params, err := request.MutableParameters(vac, p.o.Driver.DriverName())
	if cleanUp && err != nil {
		klog.FromContext(ctx).Info("Repeating CreateVolume without the VolumeAttributesClass's parameters", "pvc", klog.KObj(claim), "err", err)
		return nil, nil
	}
	return params, err
}

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
