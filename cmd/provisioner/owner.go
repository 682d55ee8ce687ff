package main

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// capacityOwner finds the object that owns the CSIStorageCapacity objects,
// as external-provisioner's --capacity-ownerref-level does: 0 is the pod
// itself, 1 its controller (a DaemonSet or ReplicaSet), 2 that one's
// controller (a Deployment). A negative level means no owner.
func capacityOwner(ctx context.Context, client kubernetes.Interface, namespace, podName string, level int) (*metav1.OwnerReference, error) {
	if level < 0 {
		return nil, nil
	}
	if podName == "" || namespace == "" {
		return nil, errors.New("--capacity-ownerref-level needs POD_NAME and NAMESPACE in the environment (or a negative level)")
	}
	pod, err := client.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading this pod: %w", err)
	}
	isController := true
	ref := &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &isController}
	meta := &pod.ObjectMeta
	for i := 0; i < level; i++ {
		owner := metav1.GetControllerOfNoCopy(meta)
		if owner == nil {
			return nil, fmt.Errorf("%s %s has no controller at ownerref level %d", ref.Kind, ref.Name, i+1)
		}
		ref = owner.DeepCopy()
		switch owner.Kind {
		case "ReplicaSet":
			rs, err := client.AppsV1().ReplicaSets(namespace).Get(ctx, owner.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			meta = &rs.ObjectMeta
		case "DaemonSet", "Deployment", "StatefulSet":
			if i+1 < level {
				return nil, fmt.Errorf("%s %s is the top; level %d is too high", owner.Kind, owner.Name, level)
			}
		default:
			if i+1 < level {
				return nil, fmt.Errorf("cannot follow owner kind %s", owner.Kind)
			}
		}
	}
	return ref, nil
}
