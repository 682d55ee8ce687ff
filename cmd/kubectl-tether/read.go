package main

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/explain"
)

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// reader reads, and only reads, what an explanation needs.
type reader struct {
	client kubernetes.Interface
}

// read gathers the claim and everything around it. Only the claim itself
// is required; any other list that cannot be read (RBAC of a namespace
// user) is recorded as a gap.
func read(ctx context.Context, r reader, namespace, name string) (explain.Input, error) {
	claim, err := r.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return explain.Input{}, fmt.Errorf("read claim %s/%s: %w", namespace, name, err)
	}
	in := explain.Input{Claim: claim, Now: time.Now()}
	gap := func(resource, scope string, err error) {
		in.Unreadable = append(in.Unreadable, explain.Gap{Resource: resource, Error: why(err, scope)})
	}
	if l, err := r.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{}); err != nil {
		gap("persistentvolumes", "list, cluster", err)
	} else {
		in.Volumes = ptrs(l.Items)
	}
	if l, err := r.client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{}); err != nil {
		gap("storageclasses", "list, cluster", err)
	} else {
		in.Classes = ptrs(l.Items)
	}
	if node := claim.Annotations[storagehelpers.AnnSelectedNode]; node != "" {
		n, err := r.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		switch {
		case err == nil:
			in.SelectedNode = n
		case !apierrors.IsNotFound(err):
			gap("nodes", "get "+node, err)
		}
	}
	if l, err := r.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{}); err != nil {
		gap("pods", "list, namespace "+namespace, err)
	} else {
		in.Pods = ptrs(l.Items)
	}
	if l, err := r.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{}); err != nil {
		gap("events", "list, namespace "+namespace, err)
	} else {
		in.Events = ptrs(l.Items)
	}
	if l, err := r.client.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{}); err != nil {
		gap("leases", "list, all namespaces", err)
	} else {
		in.Leases = ptrs(l.Items)
	}
	in.Capacities, err = r.capacities(ctx, namespace)
	if err != nil {
		gap("csistoragecapacities", "list, all namespaces and "+namespace, err)
	}
	if l, err := r.client.StorageV1().CSINodes().List(ctx, metav1.ListOptions{}); err != nil {
		gap("csinodes", "list, cluster", err)
	} else {
		in.CSINodes = ptrs(l.Items)
	}
	return in, nil
}

// capacities lists CSIStorageCapacity objects of every namespace, or of the
// claim's when that is all the user may read.
func (r reader) capacities(ctx context.Context, namespace string) ([]*storagev1.CSIStorageCapacity, error) {
	l, err := r.client.StorageV1().CSIStorageCapacities(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err == nil {
		return ptrs(l.Items), nil
	}
	if l, err2 := r.client.StorageV1().CSIStorageCapacities(namespace).List(ctx, metav1.ListOptions{}); err2 == nil && len(l.Items) > 0 {
		return ptrs(l.Items), nil
	}
	return nil, err
}

// why shortens an API error for the "could not read" list.
func why(err error, scope string) string {
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden (" + scope + ")"
	case apierrors.IsUnauthorized(err):
		return "unauthorized"
	}
	return err.Error()
}

type listItem interface {
	v1.PersistentVolume | storagev1.StorageClass | v1.Pod | v1.Event | coordinationv1.Lease |
		storagev1.CSIStorageCapacity | storagev1.CSINode
}

func ptrs[T listItem](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
