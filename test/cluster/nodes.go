package cluster

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// FakeNode describes a Node with no kubelet behind it.
type FakeNode struct {
	Name   string
	Labels map[string]string
	// Driver and TopologyKeys, if set, make a CSINode naming the driver.
	Driver       string
	TopologyKeys []string
}

// AddFakeNode creates a Node that kube-scheduler will place pods on: Ready,
// with room for pods, and without the not-ready taint the API server puts
// on new nodes. With a driver it also creates the node's CSINode.
func AddFakeNode(ctx context.Context, client kubernetes.Interface, n FakeNode) error {
	labels := map[string]string{"kubernetes.io/hostname": n.Name}
	for k, v := range n.Labels {
		labels[k] = v
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	// Controllers (ttl, ipam…) write to new nodes too: retry on conflicts.
	nodes := client.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Capacity, node.Status.Allocatable = room, room
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "FakeNode", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s status: %w", n.Name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == "node.kubernetes.io/not-ready" || t.Key == "node.kubernetes.io/unreachable"
		})
		_, err = nodes.Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s taints: %w", n.Name, err)
	}
	if n.Driver == "" {
		return nil
	}
	csiNode := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n.Name}, Spec: storagev1.CSINodeSpec{
		Drivers: []storagev1.CSINodeDriver{{Name: n.Driver, NodeID: n.Name, TopologyKeys: n.TopologyKeys}}}}
	if _, err := client.StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("CSINode %s: %w", n.Name, err)
	}
	return nil
}
