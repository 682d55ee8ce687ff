package request

import (
	"errors"
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
)

// Supported refuses, as external-provisioner does, a claim that this
// provisioner cannot serve whatever its class says: one with a label
// selector (a new volume has no labels to match), and one that names a
// VolumeAttributesClass when the driver lacks MODIFY_VOLUME. It is pure.
func Supported(claim *v1.PersistentVolumeClaim, modifyVolume bool) error {
	if ptr.Deref(claim.Spec.VolumeAttributesClassName, "") != "" && !modifyVolume {
		return errors.New("the CSI driver does not support VolumeAttributesClass: it does not report the controller capability MODIFY_VOLUME")
	}
	if claim.Spec.Selector != nil {
		return errors.New("claim Selector is not supported: a provisioned volume has no labels to match it")
	}
	return nil
}

// MutableParameters are the parameters a VolumeAttributesClass gives a
// CreateVolume of driver (its mutable_parameters). A class of another
// driver is an error. It is pure.
func MutableParameters(vac *storagev1.VolumeAttributesClass, driver string) (map[string]string, error) {
	if vac.DriverName != driver {
		return nil, fmt.Errorf("the VolumeAttributesClass %s is for the driver %q, not %q", vac.Name, vac.DriverName, driver)
	}
	return maps.Clone(vac.Parameters), nil
}
