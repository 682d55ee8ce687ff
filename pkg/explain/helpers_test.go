package explain

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/inflight"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

const driver = "disk.csi.example.com"

type claimOpt func(*v1.PersistentVolumeClaim)

func newClaim(name, class, size string, opts ...claimOpt) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}},
		},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func ann(k, val string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { metav1.SetMetaDataAnnotation(&c.ObjectMeta, k, val) }
}
func noClass() claimOpt { return func(c *v1.PersistentVolumeClaim) { c.Spec.StorageClassName = nil } }
func claimModes(m ...v1.PersistentVolumeAccessMode) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.AccessModes = m }
}
func block() claimOpt {
	return func(c *v1.PersistentVolumeClaim) { m := v1.PersistentVolumeBlock; c.Spec.VolumeMode = &m }
}
func claimVAC(s string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeAttributesClassName = &s }
}
func selector(k, val string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{k: val}}
	}
}
func volumeName(n string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName = n }
}
func bound(pv string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.VolumeName = pv
		c.Status.Phase = v1.ClaimBound
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
	}
}
func deleting(finalizers ...string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		t := metav1.NewTime(now.Add(-10 * time.Second))
		c.DeletionTimestamp = &t
		c.Finalizers = finalizers
	}
}
func annotated() claimOpt { return ann(storagehelpers.AnnStorageProvisioner, driver) }
func selectedNode(n string) claimOpt {
	return ann(storagehelpers.AnnSelectedNode, n)
}
func inFlight(volume string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { inflight.Record(c, driver, volume) }
}

type pvOpt func(*v1.PersistentVolume)

func newPV(name, class, size string, opts ...pvOpt) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
		Spec: v1.PersistentVolumeSpec{
			StorageClassName: class,
			Capacity:         v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)},
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable},
	}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

func pvLabels(k, val string) pvOpt {
	return func(pv *v1.PersistentVolume) { pv.Labels = map[string]string{k: val} }
}
func pvVAC(s string) pvOpt {
	return func(pv *v1.PersistentVolume) { pv.Spec.VolumeAttributesClassName = &s }
}
func pvClaimRef(ns, name string) pvOpt {
	return func(pv *v1.PersistentVolume) {
		pv.Spec.ClaimRef = &v1.ObjectReference{Namespace: ns, Name: name, UID: "uid-" + types.UID(name)}
		pv.Status.Phase = v1.VolumeBound
	}
}
func pvNode(node string) pvOpt {
	return func(pv *v1.PersistentVolume) {
		pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{node}}}}}}}
	}
}

func class(name, provisioner string, wffc bool, isDefault bool) *storagev1.StorageClass {
	mode := storagev1.VolumeBindingImmediate
	if wffc {
		mode = storagev1.VolumeBindingWaitForFirstConsumer
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	if isDefault {
		sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	return sc
}

func node(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
}

func csiNode(name string) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: name}}}}
}

func pod(name, claim, nodeName, schedMsg string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1.PodSpec{NodeName: nodeName, Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}},
		Status: v1.PodStatus{Phase: v1.PodPending}}
	if schedMsg != "" {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable", Message: schedMsg}}
	}
	return p
}

func lease(name, holder string, renewedAgo time.Duration) *coordinationv1.Lease {
	d := int32(15)
	t := metav1.NewMicroTime(now.Add(-renewedAgo))
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &t}}
}

func event(claim, reason, msg, from string, count int32) *v1.Event {
	t := metav1.NewTime(now.Add(-5 * time.Second))
	return &v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: claim + "." + reason},
		InvolvedObject: v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: claim, UID: types.UID("uid-" + claim)},
		Reason:         reason, Message: msg, Type: v1.EventTypeWarning, Source: v1.EventSource{Component: from},
		Count: count, FirstTimestamp: t, LastTimestamp: t}
}

func capacity(class, nodeName, size string) *storagev1.CSIStorageCapacity {
	q := resource.MustParse(size)
	return &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cap-" + nodeName},
		StorageClassName: class, Capacity: &q,
		NodeTopology: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/hostname": nodeName}}}
}
