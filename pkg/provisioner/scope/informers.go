package scope

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// goneClaims is how many deleted claims a claim Keeper's Gone remembers:
// enough for the volumes of a namespace deleted at once to be released
// without a read each, and a few hundred KiB at most.
const goneClaims = 4096

// ClaimKeeper is the Keeper of the claims s keeps: Seen holds, for every
// claim, the volume name it is provisioned under (volumeName of its UID),
// and Gone the UIDs of the last bound claims deleted.
func (s Scope) ClaimKeeper(volumeName func(uid string) string) *Keeper {
	gone := NewGone(goneClaims)
	k := NewKeeper(KeeperOptions{
		Hold: func(obj runtime.Object) bool {
			c, ok := obj.(*v1.PersistentVolumeClaim)
			return !ok || s.Claim(c)
		},
		Stay: func(obj runtime.Object) bool {
			c, ok := obj.(*v1.PersistentVolumeClaim)
			return !ok || KeepClaim(c)
		},
		Names: func(obj runtime.Object) []string {
			if c, ok := obj.(*v1.PersistentVolumeClaim); ok {
				return []string{volumeName(string(c.UID))}
			}
			return nil
		},
		Observe: func(obj runtime.Object, deleted bool) {
			if c, ok := obj.(*v1.PersistentVolumeClaim); ok && deleted && c.Spec.VolumeName != "" {
				gone.Add(c.UID)
			}
		},
	})
	k.gone = gone
	return k
}

// VolumeKeeper is the Keeper of the PVs s keeps: Seen holds every PV's
// name and CSI handle.
func (s Scope) VolumeKeeper() *Keeper {
	return NewKeeper(KeeperOptions{
		Hold: func(obj runtime.Object) bool {
			pv, ok := obj.(*v1.PersistentVolume)
			return !ok || s.Volume(pv)
		},
		Stay: func(obj runtime.Object) bool {
			pv, ok := obj.(*v1.PersistentVolume)
			return !ok || s.KeepVolume(pv)
		},
		Names: func(obj runtime.Object) []string {
			pv, ok := obj.(*v1.PersistentVolume)
			if !ok {
				return nil
			}
			if pv.Spec.CSI != nil {
				return []string{pv.Name, pv.Spec.CSI.VolumeHandle}
			}
			return []string{pv.Name}
		},
	})
}

// InformerOptions are what a claim or PV informer is built with, besides
// its client and its Keeper.
type InformerOptions struct {
	// Transform is the informer's transform, which its listings apply too
	// (ListerWatcher.Transform).
	Transform cache.TransformFunc
	// Behind makes its first listing one behind the watch
	// (ListerWatcher.Behind).
	Behind bool
	// BehindAfter is waited for before the rest of that listing is read
	// (ListerWatcher.BehindAfter).
	BehindAfter func(ctx context.Context) error
}

// ClaimInformer is an informer of the claims k keeps, across namespaces,
// with the namespace index the listers read.
func ClaimInformer(client kubernetes.Interface, k *Keeper, o InformerOptions) cache.SharedIndexInformer {
	claims := client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll)
	pages := TypedPages(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return claims.List(ctx, o) })
	if rc, ok := restClient(client); ok {
		pages = StreamPages[v1.PersistentVolumeClaim](rc, "persistentvolumeclaims")
	}
	lw := &ListerWatcher{
		ListPage: pages,
		WatchAll: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return claims.Watch(ctx, o)
		},
		NewList:     func() runtime.Object { return &v1.PersistentVolumeClaimList{} },
		Empty:       func() runtime.Object { return &v1.PersistentVolumeClaim{} },
		Keeper:      k,
		Resource:    "persistentvolumeclaims",
		Transform:   o.Transform,
		Behind:      o.Behind,
		BehindAfter: o.BehindAfter,
	}
	inf := cache.NewSharedIndexInformerWithOptions(lw, &v1.PersistentVolumeClaim{}, cache.SharedIndexInformerOptions{
		Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
	_ = inf.SetTransform(o.Transform) // cannot fail before Run
	return inf
}

// VolumeInformer is an informer of the PVs k keeps, and its
// ListerWatcher (whose Relist makes it list again).
func VolumeInformer(client kubernetes.Interface, k *Keeper, o InformerOptions) (cache.SharedIndexInformer, *ListerWatcher) {
	pvs := client.CoreV1().PersistentVolumes()
	pages := TypedPages(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pvs.List(ctx, o) })
	if rc, ok := restClient(client); ok {
		pages = StreamPages[v1.PersistentVolume](rc, "persistentvolumes")
	}
	lw := &ListerWatcher{
		ListPage: pages,
		WatchAll: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pvs.Watch(ctx, o)
		},
		NewList:     func() runtime.Object { return &v1.PersistentVolumeList{} },
		Empty:       func() runtime.Object { return &v1.PersistentVolume{} },
		Keeper:      k,
		Resource:    "persistentvolumes",
		Transform:   o.Transform,
		Behind:      o.Behind,
		BehindAfter: o.BehindAfter,
	}
	inf := cache.NewSharedIndexInformerWithOptions(lw, &v1.PersistentVolume{}, cache.SharedIndexInformerOptions{})
	_ = inf.SetTransform(o.Transform) // cannot fail before Run
	return inf, lw
}

// restClient is the core group's REST client of client, through which
// pages are read one object at a time (StreamPages); false for a client
// without one (the fake clientset), whose pages are read whole.
func restClient(client kubernetes.Interface) (rest.Interface, bool) {
	rc, ok := client.CoreV1().RESTClient().(*rest.RESTClient)
	return rc, ok && rc != nil
}
