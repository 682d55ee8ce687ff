package libv8

import (
	"errors"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
)

func TestSyncedVACs(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(newVAC("gold", driverNm, nil)); err != nil {
		t.Fatal(err)
	}
	synced := false
	l := SyncedVACs(storagelisters.NewVolumeAttributesClassLister(idx), func() bool { return synced })
	if _, err := l.Get("gold"); err == nil || !errors.Is(err, errVACsNotSynced) {
		t.Errorf("Get before the sync: %v, want the not-synced error", err)
	}
	if _, err := l.List(labels.Everything()); !errors.Is(err, errVACsNotSynced) {
		t.Errorf("List before the sync: %v, want the not-synced error", err)
	}
	synced = true
	if v, err := l.Get("gold"); err != nil || v.Name != "gold" {
		t.Errorf("Get after the sync: %v, %v", v, err)
	}
	if _, err := l.Get("platinum"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing class: %v, want NotFound", err)
	}
}

func newVAC(name, driver string, params map[string]string) *storagev1.VolumeAttributesClass {
	return &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: driver, Parameters: params}
}

const driverNm = "csi.tether.dev"
