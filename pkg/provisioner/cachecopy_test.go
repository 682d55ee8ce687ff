package provisioner

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// A change to a PV read through CopyingVolumes does not reach the cache.
func TestCopyingVolumes(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.PersistentVolume{}, 0, cache.Indexers{})
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Finalizers: []string{FinalizerVolume}}}
	if err := inf.GetStore().Add(pv); err != nil {
		t.Fatal(err)
	}
	store := CopyingVolumes(inf).GetStore()
	obj, ok, err := store.GetByKey("pv")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	obj.(*v1.PersistentVolume).Finalizers = nil // as the library does
	listed := store.List()
	listed[0].(*v1.PersistentVolume).Finalizers = nil
	if cached, _, _ := inf.GetStore().GetByKey("pv"); len(cached.(*v1.PersistentVolume).Finalizers) != 1 {
		t.Errorf("the cache's PV changed: finalizers %v", cached.(*v1.PersistentVolume).Finalizers)
	}
	if _, ok, _ := store.GetByKey("gone"); ok {
		t.Error("a missing key exists")
	}
}
