package provisioner

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// cloneSource checks the source claim of a clone (name, in the clone's
// namespace; see contentSource).
func (p *Provisioner) cloneSource(ctx context.Context, claim *v1.PersistentVolumeClaim, name string, cleanUp bool) (*csi.VolumeContentSource, *v1.PersistentVolumeClaim, error) {
	if !p.o.Clone && !cleanUp {
		return nil, nil, fmt.Errorf("the driver %s cannot clone volumes (no CLONE_VOLUME capability)", p.o.Driver.DriverName())
	}
	src, err := p.o.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("clone source claim %s: %w", name, err)
	}
	switch {
	case src.DeletionTimestamp != nil && !cleanUp:
		// (A clean-up takes it: the cloning protection keeps it for that.)
		return nil, nil, fmt.Errorf("clone source claim %s is being deleted", name)
	case src.Status.Phase != v1.ClaimBound || src.Spec.VolumeName == "":
		return nil, nil, fmt.Errorf("clone source claim %s is not bound", name)
	case storagehelpers.GetPersistentVolumeClaimClass(src) != storagehelpers.GetPersistentVolumeClaimClass(claim):
		return nil, nil, fmt.Errorf("clone source claim %s has another storage class", name)
	}
	want, have := claim.Spec.Resources.Requests[v1.ResourceStorage], src.Spec.Resources.Requests[v1.ResourceStorage]
	if want.Cmp(have) < 0 {
		return nil, nil, fmt.Errorf("the clone requests %s, less than its source's %s", want.String(), have.String())
	}
	pv, err := p.o.Client.CoreV1().PersistentVolumes().Get(ctx, src.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("clone source volume %s: %w", src.Spec.VolumeName, err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != p.o.Driver.DriverName() {
		return nil, nil, fmt.Errorf("clone source volume %s does not belong to the driver %s", pv.Name, p.o.Driver.DriverName())
	}
	if err := request.CheckCloneVolumeMode(claim.Spec.VolumeMode, pv.Spec.VolumeMode); err != nil {
		return nil, nil, fmt.Errorf("clone source claim %s: %w", name, err)
	}
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: pv.Spec.CSI.VolumeHandle}}}, src, nil
}
