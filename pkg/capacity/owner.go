package capacity

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
)

// Getter reads the metadata of one object of any kind.
type Getter func(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (metav1.Object, error)

var podKind = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}

// MetadataGetter reads objects' metadata (a GET that returns only the
// metadata, with the RBAC of a GET) with client; mapper finds a kind's
// resource, except for pods, which need no lookup: reading the pod alone
// (levels 0 and 1) makes no discovery request.
func MetadataGetter(client metadata.Interface, mapper meta.RESTMapper) Getter {
	return func(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (metav1.Object, error) {
		gvr, namespaced := schema.GroupVersionResource{Version: "v1", Resource: "pods"}, true
		if gvk != podKind {
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return nil, err
			}
			gvr, namespaced = m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace
		}
		if namespaced {
			return client.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		}
		return client.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	}
}

// LookupOwner finds the owner of the CSIStorageCapacity objects as
// external-provisioner's --capacity-ownerref-level does: level 0 is the
// pod itself, 1 its controller, 2 that one's controller, and so on, of
// any kind. It reads the pod and every owner below the one returned, none
// above: level 1 reads the pod only, level 2 (the Deployment of a pod of a
// ReplicaSet, the CronJob of a Job's pod) the pod and its controller. Each
// read needs RBAC get on its kind; a read refused names the kind. A
// negative level means no owner (nil).
func LookupOwner(ctx context.Context, get Getter, namespace, podName string, level int) (*metav1.OwnerReference, error) {
	if level < 0 {
		return nil, nil
	}
	if podName == "" || namespace == "" {
		return nil, errors.New("--capacity-ownerref-level needs POD_NAME and NAMESPACE in the environment (or a negative level)")
	}
	isController := true
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: podName, Controller: &isController}
	for i := 0; ; i++ {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("owner at level %d, %s %s: apiVersion %q: %w", i, ref.Kind, ref.Name, ref.APIVersion, err)
		}
		obj, err := get(ctx, gv.WithKind(ref.Kind), namespace, ref.Name)
		if err != nil {
			err = fmt.Errorf("reading the owner at level %d, %s %s %s/%s: %w", i, ref.APIVersion, ref.Kind, namespace, ref.Name, err)
			if apierrors.IsForbidden(err) {
				err = fmt.Errorf("%w (--capacity-ownerref-level=%d reads every owner below the one it names: the provisioner's Role needs get on %s)", err, level, ref.Kind)
			}
			return nil, err
		}
		ref.UID = obj.GetUID()
		if i == level {
			return &ref, nil
		}
		owner := metav1.GetControllerOfNoCopy(obj)
		if owner == nil {
			return nil, fmt.Errorf("--capacity-ownerref-level=%d: %s %s %s/%s, at level %d, has no controller", level, ref.APIVersion, ref.Kind, namespace, ref.Name, i)
		}
		ref = metav1.OwnerReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID, Controller: &isController}
		if i+1 == level {
			// Taken from the reference: the owner itself is not read.
			return &ref, nil
		}
	}
}
