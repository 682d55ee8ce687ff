package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// clusterID is the ID that --orphan-policy=delete marks new volumes with
// and deletes by: the flag's value, else the UID of the kube-system
// namespace, which lives as long as the cluster and differs between
// clusters.
func clusterID(ctx context.Context, client kubernetes.Interface, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	ns, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("--orphan-policy=delete: reading the cluster's ID (the UID of namespace %s; or set --cluster-id): %w", metav1.NamespaceSystem, err)
	}
	klog.FromContext(ctx).V(2).Info("Cluster ID for the ownership mark", "namespace", klog.KObj(ns), "uid", ns.UID)
	return string(ns.UID), nil
}
