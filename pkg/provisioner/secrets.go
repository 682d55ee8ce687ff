package provisioner

import (
	"context"

	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

// deletionSecrets reads the secret of request.DeletionSecretRef. A secret that is
// gone (or that this provisioner may not read) is no reason to keep a
// volume: as external-provisioner, DeleteVolume goes without it (the driver
// decides). Other errors are retried.
func (p *Provisioner) deletionSecrets(ctx context.Context, pv *v1.PersistentVolume) (map[string]string, error) {
	var class *storagev1.StorageClass
	if name := storagehelpers.GetPersistentVolumeClass(pv); name != "" && p.o.Classes != nil {
		c, err := p.o.Classes.Get(name)
		switch {
		case err == nil:
			class = c
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	ref, err := request.DeletionSecretRef(pv, class)
	if err != nil || ref == nil {
		return nil, err
	}
	secrets, err := p.secret(ctx, ref)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		klog.FromContext(ctx).Info("Deleting the volume without its deletion secret, which cannot be read", "pv", klog.KObj(pv),
			"secret", klog.KRef(ref.Namespace, ref.Name), "reason", apierrors.ReasonForError(err))
		return nil, nil
	}
	return secrets, err
}
