package protect

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/tether-csi/tether/pkg/inflight"
)

// sourceUsers is what the clone and snapshot protections share: an index
// of claims by the key (namespace/name) of the source they are made from,
// and a queue of source keys that every change of such a claim feeds.
type sourceUsers struct {
	claims   cache.SharedIndexInformer
	index    string
	sourceOf func(*v1.PersistentVolumeClaim) (string, bool)
	queue    workqueue.TypedRateLimitingInterface[string]
}

// newSourceUsers adds the index (named index) to the claim informer, which
// must not have been started yet, and queues a claim's source on its every
// event (add, update, delete).
func newSourceUsers(claims cache.SharedIndexInformer, index string, queue workqueue.TypedRateLimitingInterface[string],
	sourceOf func(*v1.PersistentVolumeClaim) (string, bool)) (*sourceUsers, error) {
	u := &sourceUsers{claims: claims, index: index, sourceOf: sourceOf, queue: queue}
	if err := claims.AddIndexers(cache.Indexers{index: u.indexKeys}); err != nil {
		return nil, err
	}
	queueSource := func(obj any) {
		if claim := claimOf(obj); claim != nil {
			if key, ok := u.sourceKey(claim); ok {
				u.queue.Add(key)
			}
		}
	}
	if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    queueSource,
		UpdateFunc: func(_, obj any) { queueSource(obj) },
		DeleteFunc: queueSource,
	}); err != nil {
		return nil, err
	}
	return u, nil
}

func (u *sourceUsers) sourceKey(claim *v1.PersistentVolumeClaim) (string, bool) {
	name, ok := u.sourceOf(claim)
	if !ok {
		return "", false
	}
	return claim.Namespace + "/" + name, true
}

func (u *sourceUsers) indexKeys(obj any) ([]string, error) {
	if claim, ok := obj.(*v1.PersistentVolumeClaim); ok {
		if key, ok := u.sourceKey(claim); ok {
			return []string{key}, nil
		}
	}
	return nil, nil
}

// of returns the claims made from the source key.
func (u *sourceUsers) of(key string) ([]*v1.PersistentVolumeClaim, error) {
	objs, err := u.claims.GetIndexer().ByIndex(u.index, key)
	if err != nil {
		return nil, err
	}
	claims := make([]*v1.PersistentVolumeClaim, 0, len(objs))
	for _, o := range objs {
		if c, ok := o.(*v1.PersistentVolumeClaim); ok {
			claims = append(claims, c)
		}
	}
	return claims, nil
}

// claimOf is the claim of an informer event, tombstones unwrapped; nil
// for anything else.
func claimOf(obj any) *v1.PersistentVolumeClaim {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	claim, _ := obj.(*v1.PersistentVolumeClaim)
	return claim
}

// makingVolume reports whether a claim made from a source (a clone or a
// restore) may still be making its volume from it: being deleted while it
// holds its in-flight record, live and not bound yet, or bound while its
// record names another volume than the one it is bound to, or is of a
// format this provisioner does not read (inflight.Unread).
func makingVolume(c *v1.PersistentVolumeClaim) bool {
	switch {
	case c.DeletionTimestamp != nil:
		return inflight.Holds(c)
	case c.Spec.VolumeName == "", inflight.Unread(c):
		return true
	case inflight.Holds(c):
		_, name, ok := inflight.Volume(c)
		return ok && name != c.Spec.VolumeName
	}
	return false
}
