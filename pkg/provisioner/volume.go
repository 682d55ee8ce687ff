package provisioner

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/migration"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
)

// volumeInput is what the PV of a CreateVolume's answer is built from.
type volumeInput struct {
	Claim *v1.PersistentVolumeClaim
	Name  string
	Class *storagev1.StorageClass
	// Migrated: the claim's class is an in-tree one under CSI migration.
	Migrated bool
	Prepared *prepared
}

// volumeFor builds the PV that Provision hands the library for a
// CreateVolume's answer: a CSI PV, or for a migrated claim an in-tree one
// (as external-provisioner). An answer no PV can describe is a volume
// nobody could use: it is deleted, and only once the driver confirms is
// the in-flight record dropped; until then the record keeps the volume
// tracked (ProvisioningInBackground).
func (p *Provisioner) volumeFor(ctx context.Context, resp *csi.CreateVolumeResponse, in volumeInput) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	prep := in.Prepared
	pv, err := request.BuildPV(resp, request.PVInput{
		Name: in.Name, Driver: p.o.Driver.DriverName(), Identity: p.o.Identity, Claim: in.Claim,
		ReclaimPolicy: request.ReclaimPolicy(in.Class), MountOptions: in.Class.MountOptions,
		FSType: request.ChosenFSType(prep.params, p.o.Request.DefaultFSType), Secrets: prep.secretRefs,
		ControllerPublishReadOnly: p.o.Request.ControllerPublishReadOnly,
	})
	if err == nil && in.Migrated {
		pv, err = migration.ToInTree(pv)
	}
	if err == nil {
		return pv, controller.ProvisioningFinished, nil
	}
	err = fmt.Errorf("the driver's answer for %s is unusable: %w", in.Name, err)
	if _, derr := p.o.Driver.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: prep.req.Secrets}); derr != nil {
		return nil, controller.ProvisioningInBackground, fmt.Errorf("%w; deleting it failed too: %v", err, derr)
	}
	if rerr := p.record.Drop(ctx, in.Claim); rerr != nil {
		klog.FromContext(ctx).Error(rerr, "Removing the in-flight record")
	}
	return nil, controller.ProvisioningFinished, err
}
