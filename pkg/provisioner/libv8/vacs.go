package libv8

import (
	"errors"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
)

// SyncedVACs wraps the VolumeAttributesClass lister so that it answers
// with an error until its informer has synced. The provisioner does not
// wait for that informer at start: external-provisioner's RBAC has no
// rule for volumeattributesclasses (it reads one with a GET, per claim),
// and with that RBAC the informer never syncs. Then only the claims that
// name a class fail, with this error, instead of the whole provisioner
// waiting for ever.
func SyncedVACs(l storagelisters.VolumeAttributesClassLister, synced cache.InformerSynced) storagelisters.VolumeAttributesClassLister {
	return syncedVACs{l, synced}
}

type syncedVACs struct {
	storagelisters.VolumeAttributesClassLister
	synced cache.InformerSynced
}

var errVACsNotSynced = errors.New("the VolumeAttributesClass cache has not synced yet (the provisioner needs to list and watch volumeattributesclasses)")

func (s syncedVACs) Get(name string) (*storagev1.VolumeAttributesClass, error) {
	if !s.synced() {
		return nil, errVACsNotSynced
	}
	return s.VolumeAttributesClassLister.Get(name)
}

func (s syncedVACs) List(selector labels.Selector) ([]*storagev1.VolumeAttributesClass, error) {
	if !s.synced() {
		return nil, errVACsNotSynced
	}
	return s.VolumeAttributesClassLister.List(selector)
}
