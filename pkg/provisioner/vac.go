package provisioner

import (
	"context"
	"fmt"

	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// mutableParameters reads the claim's VolumeAttributesClass, if it names
// one. A class that does not exist (yet) is an error, which the library
// retries with backoff, as external-provisioner does. The clean-up of a
// deleted claim goes on without a class that is gone: it only has to find
// the volume again.
func (p *Provisioner) mutableParameters(ctx context.Context, claim *v1.PersistentVolumeClaim, cleanUp bool) (map[string]string, error) {
	name := ptr.Deref(claim.Spec.VolumeAttributesClassName, "")
	if name == "" {
		return nil, nil
	}
	if p.o.VolumeAttributesClasses == nil {
		return nil, fmt.Errorf("the claim names the VolumeAttributesClass %s, and this provisioner does not read those", name)
	}
	vac, err := p.o.VolumeAttributesClasses.Get(name)
	if cleanUp && apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Info("The claim's VolumeAttributesClass is gone; repeating CreateVolume without its parameters",
			"pvc", klog.KObj(claim), "volumeAttributesClass", name)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the VolumeAttributesClass %s: %w", name, err)
	}
	params, err := request.MutableParameters(vac, p.o.Driver.DriverName())
	if cleanUp && err != nil {
		klog.FromContext(ctx).Info("Repeating CreateVolume without the VolumeAttributesClass's parameters", "pvc", klog.KObj(claim), "err", err)
		return nil, nil
	}
	return params, err
}
