package provisioner

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// FinalizerCloneSource keeps a clone's source claim from being deleted
// while the driver copies it; external-provisioner uses the same name.
const FinalizerCloneSource = "provisioner.storage.kubernetes.io/cloning-protection"

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

// protectSource adds the cloning finalizer to the source claim. Clones of
// one source made at once each add it: a write that conflicts (another
// clone's, or any change of the source) is made again from a fresh read,
// as long as that read is still the source that was checked
// (protectDecision), instead of failing the clone's provisioning.
func (p *Provisioner) protectSource(ctx context.Context, claim, src *v1.PersistentVolumeClaim) error {
	checked, current := src, src
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if current == nil {
			fresh, err := p.o.Client.CoreV1().PersistentVolumeClaims(src.Namespace).Get(ctx, src.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			current = fresh
		}
		add, err := protectDecision(checked, current)
		if err != nil || !add {
			return err
		}
		c := current.DeepCopy()
		c.Finalizers = append(c.Finalizers, FinalizerCloneSource)
		current = nil
		_, err = p.o.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("protecting clone source %s: %w", src.Name, err)
	}
	return nil
}

// protectDecision says, on a read of a clone's source claim (current),
// whether the cloning finalizer must be added to it: not when it holds it
// already; an error when it is no longer the source that was checked
// (checked): another claim of the name, or, unprotected, one being deleted
// or bound to another volume. Pure.
func protectDecision(checked, current *v1.PersistentVolumeClaim) (bool, error) {
	switch {
	case current.UID != checked.UID:
		return false, fmt.Errorf("clone source claim %s was replaced", checked.Name)
	case slices.Contains(current.Finalizers, FinalizerCloneSource):
		return false, nil
	case current.DeletionTimestamp != nil:
		return false, fmt.Errorf("clone source claim %s is being deleted", checked.Name)
	case current.Spec.VolumeName != checked.Spec.VolumeName:
		return false, fmt.Errorf("clone source claim %s is bound to another volume now", checked.Name)
	}
	return true, nil
}
