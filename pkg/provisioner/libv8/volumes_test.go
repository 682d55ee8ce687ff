package libv8

import (
	"testing"

	storagehelpers "k8s.io/component-helpers/storage/volume"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// A change to a PV read through CopyingVolumes does not reach the cache.
func TestCopyingVolumes(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.PersistentVolume{}, 0, cache.Indexers{})
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Finalizers: []string{storagehelpers.PVDeletionProtectionFinalizer}}}
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

// TestCopyingVolumesWrites: the library's copy of a PV it just saved (no
// resourceVersion) never replaces the watch's object; it is stored when
// the watch has not delivered the PV yet, and the watch's object then
// replaces it.
func TestCopyingVolumesWrites(t *testing.T) {
	saved := func(rv string, phase v1.PersistentVolumePhase) *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", ResourceVersion: rv}, Status: v1.PersistentVolumeStatus{Phase: phase}}
	}
	for _, tt := range []struct {
		name   string
		writes []*v1.PersistentVolume // in order: "" resourceVersion is the library's copy
		wantRV string
	}{
		{"the library's copy first, then the watch's object", []*v1.PersistentVolume{saved("", ""), saved("7", v1.VolumeBound)}, "7"},
		{"the watch's object first, then the library's copy (the race seen in the e2e)", []*v1.PersistentVolume{saved("7", v1.VolumeBound), saved("", "")}, "7"},
		{"only the library's copy (the watch is late)", []*v1.PersistentVolume{saved("", "")}, ""},
		{"the watch's later object replaces an earlier one", []*v1.PersistentVolume{saved("7", v1.VolumeBound), saved("9", v1.VolumeReleased)}, "9"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.PersistentVolume{}, 0, cache.Indexers{})
			store := CopyingVolumes(inf).GetStore()
			for i, pv := range tt.writes {
				write := store.Add
				if i > 0 {
					write = store.Update
				}
				if pv.ResourceVersion != "" {
					write = inf.GetStore().Update // the informer's own writes (from the watch) go straight in
				}
				if err := write(pv); err != nil {
					t.Fatal(err)
				}
			}
			obj, ok, _ := inf.GetStore().GetByKey("pv")
			if !ok {
				t.Fatal("no PV in the cache")
			}
			if got := obj.(*v1.PersistentVolume).ResourceVersion; got != tt.wantRV {
				t.Errorf("the cache holds resourceVersion %q, want %q", got, tt.wantRV)
			}
		})
	}
}
