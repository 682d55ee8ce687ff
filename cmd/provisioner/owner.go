package main

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/tether-csi/tether/pkg/capacity"
)

// capacityOwner finds the object that owns the CSIStorageCapacity objects
// (--capacity-ownerref-level, capacity.LookupOwner) with a metadata client
// of cfg; the kinds of the owners it reads are resolved through client's
// discovery, read only when an owner other than the pod is read (level 2
// and up). A negative level means no owner.
func capacityOwner(ctx context.Context, cfg *rest.Config, client kubernetes.Interface, namespace, podName string, level int) (*metav1.OwnerReference, error) {
	if level < 0 {
		return nil, nil
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	return capacity.LookupOwner(ctx, capacity.MetadataGetter(meta, mapper), namespace, podName, level)
}
