package provisioner

import (
	"context"
	"fmt"

	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
)

// SupportsBlock lets the driver decide: it refuses block volumes itself.
func (p *Provisioner) SupportsBlock(context.Context) bool { return true }

// ShouldProvision skips claims that are being deleted (the in-flight
// reconciler owns those), in node-deployment mode claims of other nodes,
// and claims that wait for an edit after the driver refused their request
// (infeasible.go).
func (p *Provisioner) ShouldProvision(ctx context.Context, claim *v1.PersistentVolumeClaim) bool {
	if claim.DeletionTimestamp != nil || !p.forDriver(claim) {
		return false
	}
	if p.o.Node != nil && !p.nodeShouldProvision(ctx, claim) {
		return false
	}
	return !p.waitsForEdit(ctx, claim)
}

// forDriver reports whether a claim is for this driver: its
// storage-provisioner annotation (or the beta one) or, under CSI migration,
// its pv.kubernetes.io/migrated-to names the driver, as in
// external-provisioner. The library asks ShouldProvision before it looks
// at the annotation itself, so without this a node-deployment provisioner
// would try to own other provisioners' claims (and give them a selected
// node).
func (p *Provisioner) forDriver(claim *v1.PersistentVolumeClaim) bool {
	driver := p.o.Driver.DriverName()
	provisioner, ok := claim.Annotations[storagehelpers.AnnStorageProvisioner]
	if !ok {
		provisioner = claim.Annotations[storagehelpers.AnnBetaStorageProvisioner]
	}
	return provisioner == driver || claim.Annotations[storagehelpers.AnnMigratedTo] == driver
}

// Provision makes a volume for a claim. Before CreateVolume it records on
// the claim (a finalizer) that a volume may exist for it; the record goes
// once the PV is saved, or once the volume is known not to exist. It reads
// as its steps: the current claim and the volume's name (this file), the
// request's inputs (inputs.go), the record and what else must hold before
// CreateVolume (beforecreate.go), the call (calls.go), the PV from its
// answer (volume.go), the hand-off noted (memo.go).
func (p *Provisioner) Provision(ctx context.Context, po controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	logger := klog.FromContext(ctx).WithValues("pvc", klog.KObj(po.PVC))
	ctx = klog.NewContext(ctx, logger)
	defer p.locks.Lock(string(po.PVC.UID))()

	// The library's claim may be older than the in-flight reconciler's last
	// step, taken while this call waited for the lock.
	claim, err := p.currentClaim(po.PVC)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	name := request.VolumeName(p.o.Request.VolumeNamePrefix, string(claim.UID), p.o.Request.VolumeNameUUIDLen)
	if err := p.nameFree(ctx, name, claim); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	class, migrated, err := p.csiClass(ctx, po.StorageClass)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	prep, err := p.prepare(ctx, prepareInput{Claim: claim, Class: class, Node: po.SelectedNode, Name: name})
	if err != nil {
		return nil, prepareState(err), err
	}
	if claim, err = p.beforeCreate(ctx, claim, name, prep); err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	resp, state, err := p.create(ctx, claim, name, prep.req)
	if err != nil {
		return nil, state, err
	}
	pv, state, err := p.volumeFor(ctx, resp, volumeInput{Claim: claim, Name: name, Class: class, Migrated: migrated, Prepared: prep})
	if err != nil {
		return nil, state, err
	}
	// The library saves the PV after this returns; the reconciler waits for
	// that save before it takes a deleted claim's volume for unsaved.
	p.handoffs.add(claim.UID, claim.ResourceVersion, p.now())
	p.saves.HandedOff(pv.Name)
	logger.V(2).Info("Volume created", "volume", pv.Name, "handle", resp.GetVolume().GetVolumeId())
	p.changed(pv)
	return pv, controller.ProvisioningFinished, nil
}

// currentClaim is the informer's copy of the library's claim, or an
// IgnoredError when the claim is gone, is another claim of the same name,
// is being deleted, or is bound already: no CreateVolume may start for it.
func (p *Provisioner) currentClaim(stale *v1.PersistentVolumeClaim) (*v1.PersistentVolumeClaim, error) {
	claim, err := p.o.Claims.PersistentVolumeClaims(stale.Namespace).Get(stale.Name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &controller.IgnoredError{Reason: "the claim is gone"}
	case err != nil:
		return nil, err
	case claim.UID != stale.UID:
		return nil, &controller.IgnoredError{Reason: "the claim was replaced by another of the same name"}
	case claim.DeletionTimestamp != nil:
		return nil, &controller.IgnoredError{Reason: "the claim is being deleted"}
	case claim.Spec.VolumeName != "":
		return nil, &controller.IgnoredError{Reason: "the claim is bound to " + claim.Spec.VolumeName}
	}
	return claim, nil
}

// nameFree refuses a volume name that a PV of another claim holds (two
// claims whose shortened UIDs collide under --volume-name-uuid-length):
// CreateVolume, idempotent by name, would hand this claim the other's
// volume.
func (p *Provisioner) nameFree(ctx context.Context, name string, claim *v1.PersistentVolumeClaim) error {
	pv, err := p.o.Volumes.Get(name)
	if apierrors.IsNotFound(err) && p.o.VolumeNames != nil && p.o.VolumeNames.Has(name) {
		// A PV of the name that the cache does not keep whole (another
		// driver's, another node's): the API server says whose it is.
		pv, err = p.o.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == claim.UID {
		return &controller.IgnoredError{Reason: "its PV " + name + " is saved already"}
	}
	return fmt.Errorf("the volume name %s is taken by a PV of another claim; use a longer --volume-name-uuid-length", name)
}
