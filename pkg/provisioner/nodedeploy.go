package provisioner

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

// nodeShouldProvision is ShouldProvision in node-deployment mode.
func (p *Provisioner) nodeShouldProvision(ctx context.Context, claim *v1.PersistentVolumeClaim) bool {
	if sel := claim.Annotations[storagehelpers.AnnSelectedNode]; sel != "" {
		return sel == p.o.Node.NodeName
	}
	if !p.o.Node.ImmediateBinding {
		return false
	}
	class, err := p.o.Classes.Get(storagehelpers.GetPersistentVolumeClaimClass(claim))
	if err != nil || DelayBinding(class) {
		return false // a delayed class waits for the scheduler's choice
	}
	if ds, err := request.DataSourceOf(claim); err == nil && ds.Kind == request.PopulatorSource {
		return false // a volume populator's claim: no node takes it
	}
	p.scheduleOwnership(ctx, claim)
	return false
}

// DelayBinding reports whether a class waits for the first consumer.
func DelayBinding(class *storagev1.StorageClass) bool {
	return class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

func (p *Provisioner) scheduleOwnership(ctx context.Context, claim *v1.PersistentVolumeClaim) {
	uid := string(claim.UID)
	o := &p.owners
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pending == nil {
		o.pending, o.attempts = map[string]bool{}, map[string]int{}
	}
	if o.pending[uid] {
		return
	}
	o.pending[uid] = true
	delay := p.o.Node.BaseDelay << min(o.attempts[uid], 16)
	if delay > p.o.Node.MaxDelay || delay <= 0 {
		delay = p.o.Node.MaxDelay
	}
	o.attempts[uid]++
	// Half fixed, half random, so that instances rarely write at once.
	delay = delay/2 + rand.N(delay/2+1)
	klog.FromContext(ctx).V(4).Info("Will try to own the claim", "pvc", klog.KObj(claim), "delay", delay)
	time.AfterFunc(delay, func() {
		again := p.tryOwn(ctx, claim.Namespace, claim.Name, uid)
		o.mu.Lock()
		delete(o.pending, uid)
		if !again {
			delete(o.attempts, uid)
		}
		o.mu.Unlock()
		if again && ctx.Err() == nil {
			p.scheduleOwnership(ctx, claim)
		}
	})
}

// tryOwn sets the claim's selected node to this node if it is still free
// and the driver has room. It reports whether to try again later.
func (p *Provisioner) tryOwn(ctx context.Context, namespace, name, uid string) bool {
	logger := klog.FromContext(ctx).WithValues("pvc", klog.KRef(namespace, name))
	claim, err := p.o.Client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || string(claim.UID) != uid || claim.DeletionTimestamp != nil || claim.Spec.VolumeName != "" ||
		claim.Annotations[storagehelpers.AnnSelectedNode] != "" {
		return err != nil && !apierrors.IsNotFound(err) // someone else owns it, or it is gone
	}
	node, err := p.o.Nodes.Get(p.o.Node.NodeName)
	if err != nil {
		logger.Error(err, "Reading this node")
		return true
	}
	if !p.hasRoom(ctx, claim, node) {
		return true
	}
	c := claim.DeepCopy()
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnSelectedNode, node.Name)
	if _, err := p.o.Client.CoreV1().PersistentVolumeClaims(namespace).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		logger.V(4).Info("Did not become the claim's owner", "err", err)
		return true // a conflict: look again, the winner's annotation ends it
	}
	logger.Info("Became the claim's owner", "node", node.Name)
	return false
}

// hasRoom checks allowedTopologies and, when the driver can say, capacity.
func (p *Provisioner) hasRoom(ctx context.Context, claim *v1.PersistentVolumeClaim, node *v1.Node) bool {
	logger := klog.FromContext(ctx).WithValues("pvc", klog.KObj(claim))
	class, err := p.o.Classes.Get(storagehelpers.GetPersistentVolumeClaimClass(claim))
	if err != nil {
		return false
	}
	name := request.VolumeName(p.o.Request.VolumeNamePrefix, string(claim.UID), p.o.Request.VolumeNameUUIDLen)
	prep, err := p.prepare(ctx, prepareInput{Claim: claim, Class: class, Node: node, Name: name})
	if err != nil {
		logger.V(4).Info("This node cannot take the claim", "err", err)
		return false
	}
	capDriver, ok := p.o.Driver.(CapacityDriver)
	if !ok || !p.o.GetCapacity {
		return true
	}
	var topology *csi.Topology
	if r := prep.req.AccessibilityRequirements; r != nil && len(r.Preferred) > 0 {
		topology = r.Preferred[0]
	}
	resp, err := capDriver.GetCapacity(ctx, &csi.GetCapacityRequest{
		VolumeCapabilities: prep.req.VolumeCapabilities, Parameters: prep.req.Parameters, AccessibleTopology: topology})
	if err != nil {
		logger.Error(err, "GetCapacity")
		return false
	}
	need := prep.req.GetCapacityRange().GetRequiredBytes()
	if resp.AvailableCapacity < need {
		logger.V(4).Info("Not enough room on this node", "available", resp.AvailableCapacity, "need", need)
		return false
	}
	return true
}

// onOwnNode reports whether a PV's node affinity admits this node.
func (p *Provisioner) onOwnNode(pv *v1.PersistentVolume) bool {
	node, err := p.o.Nodes.Get(p.o.Node.NodeName)
	if err != nil {
		return false
	}
	return pv.Spec.NodeAffinity != nil && storagehelpers.CheckNodeAffinity(pv, node.Labels) == nil
}

// nodeName is this provisioner's node in node-deployment mode, else "".
func (p *Provisioner) nodeName() string {
	if p.o.Node == nil {
		return ""
	}
	return p.o.Node.NodeName
}
