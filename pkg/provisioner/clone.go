package provisioner

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

// FinalizerCloneSource keeps a clone's source claim from being deleted
// while the driver copies it; external-provisioner uses the same name.
const FinalizerCloneSource = "provisioner.storage.kubernetes.io/cloning-protection"

// cloneSource checks a claim's data source. A claim as the source is a
// clone; any other kind is refused with a clear error.
func (p *Provisioner) cloneSource(ctx context.Context, claim *v1.PersistentVolumeClaim) (*csi.VolumeContentSource, *v1.PersistentVolumeClaim, error) {
	ds := claim.Spec.DataSource
	if ds == nil {
		return nil, nil, nil
	}
	if ds.Kind != "PersistentVolumeClaim" || (ds.APIGroup != nil && *ds.APIGroup != "") {
		return nil, nil, fmt.Errorf("data source %s %q is not supported: only a PersistentVolumeClaim (a clone) is", ds.Kind, ds.Name)
	}
	if !p.o.Clone {
		return nil, nil, fmt.Errorf("the driver %s cannot clone volumes (no CLONE_VOLUME capability)", p.o.Driver.DriverName())
	}
	src, err := p.o.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("clone source claim %s: %w", ds.Name, err)
	}
	switch {
	case src.DeletionTimestamp != nil:
		return nil, nil, fmt.Errorf("clone source claim %s is being deleted", ds.Name)
	case src.Status.Phase != v1.ClaimBound || src.Spec.VolumeName == "":
		return nil, nil, fmt.Errorf("clone source claim %s is not bound", ds.Name)
	case storagehelpers.GetPersistentVolumeClaimClass(src) != storagehelpers.GetPersistentVolumeClaimClass(claim):
		return nil, nil, fmt.Errorf("clone source claim %s has another storage class", ds.Name)
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
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: pv.Spec.CSI.VolumeHandle}}}, src, nil
}

// protectSource adds the cloning finalizer to the source claim.
func (p *Provisioner) protectSource(ctx context.Context, claim, src *v1.PersistentVolumeClaim) error {
	if slices.Contains(src.Finalizers, FinalizerCloneSource) {
		return nil
	}
	c := src.DeepCopy()
	c.Finalizers = append(c.Finalizers, FinalizerCloneSource)
	_, err := p.o.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("protecting clone source %s: %w", src.Name, err)
	}
	return nil
}

// releaseSource removes the cloning finalizer once the driver has answered,
// unless another claim is still being cloned from the same source.
func (p *Provisioner) releaseSource(ctx context.Context, claim, src *v1.PersistentVolumeClaim) {
	if src == nil {
		return
	}
	logger := klog.FromContext(ctx)
	others, err := p.o.Claims.PersistentVolumeClaims(claim.Namespace).List(everything)
	if err != nil {
		logger.Error(err, "Listing claims for clone protection")
		return
	}
	for _, o := range others {
		if o.UID != claim.UID && o.Spec.VolumeName == "" && o.Spec.DataSource != nil &&
			o.Spec.DataSource.Kind == "PersistentVolumeClaim" && o.Spec.DataSource.Name == src.Name {
			return // still a clone in progress; its own provisioning releases the source
		}
	}
	if err := removeFinalizer(ctx, p.o.Client, claim.Namespace, src.Name, FinalizerCloneSource); err != nil {
		logger.Error(err, "Removing the clone protection", "source", src.Name)
	}
}
