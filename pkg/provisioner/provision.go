package provisioner

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/migration"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	"github.com/tether-csi/tether/pkg/provisioner/records"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
)

// SupportsBlock lets the driver decide: it refuses block volumes itself.
func (p *Provisioner) SupportsBlock(context.Context) bool { return true }

// ShouldProvision skips claims that are being deleted (the in-flight
// reconciler owns those) and, in node-deployment mode, claims of other nodes.
func (p *Provisioner) ShouldProvision(ctx context.Context, claim *v1.PersistentVolumeClaim) bool {
	if claim.DeletionTimestamp != nil || !p.forDriver(claim) {
		return false
	}
	if p.o.Node != nil {
		return p.nodeShouldProvision(ctx, claim)
	}
	return true
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
// once the PV is saved, or once the volume is known not to exist.
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
	if err := p.nameFree(name, claim); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	class, migrated, err := p.csiClass(ctx, po.StorageClass)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	po.StorageClass = class
	prep, err := p.prepare(ctx, prepareInput{Claim: claim, Class: po.StorageClass, Node: po.SelectedNode, Name: name})
	if err != nil {
		return nil, prepareState(err), err
	}
	if node := records.ElsewhereNode(claim, p.nodeName()); node != "" {
		return nil, controller.ProvisioningNoChange, fmt.Errorf("waiting for the provisioner of node %s to clean up the volume it may have made for the claim before it was rescheduled", node)
	}
	fresh := !inflight.Holds(claim)
	if claim, err = p.record.Record(ctx, claim, name); err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	if fresh {
		p.answers.recorded(claim.UID, p.now())
	}
	p.secretsUsed.remember(claim.UID, prep.req.Secrets, p.now())
	if err := p.protect(ctx, prep.source); err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	resp, err := p.createVolume(ctx, claim.UID, prep.req)
	if err != nil {
		_, nodeSelected := claim.Annotations[storagehelpers.AnnSelectedNode]
		// As EP: ResourceExhausted on a selected node reschedules only for a
		// driver that takes topology; for others the node did not matter.
		outcome := Classify(err, nodeSelected && p.o.Topology)
		state := outcome.State()
		logger.Info("CreateVolume failed", "volume", name, "outcome", outcome.String(), "nodeSelected", nodeSelected, "err", err)
		// The record stays, whatever the error: this call made nothing, but
		// an earlier one may have (it timed out, then the driver answers
		// AlreadyExists to a changed request, or ResourceExhausted). It goes
		// with the claim's PV, or with the clean-up (at once, without a
		// driver call, when every call answered final: createAnswers).
		if outcome == Reschedule {
			if rerr := p.record.Reschedule(ctx, claim); rerr != nil {
				logger.Error(rerr, "Removing the selected node")
			}
		}
		return nil, state, fmt.Errorf("CreateVolume %s: %w", name, err)
	}
	pv, err := request.BuildPV(resp, request.PVInput{
		Name: name, Driver: p.o.Driver.DriverName(), Identity: p.o.Identity, Claim: claim,
		ReclaimPolicy: request.ReclaimPolicy(po.StorageClass), MountOptions: po.StorageClass.MountOptions,
		FSType: request.FSType(prep.params, p.o.Request.DefaultFSType), Secrets: prep.secretRefs,
	})
	if err == nil && migrated {
		// As external-provisioner: a migrated claim gets an in-tree PV.
		pv, err = migration.ToInTree(pv)
	}
	if err != nil {
		// A volume exists that we cannot describe: delete it (the in-flight
		// record stays until the driver confirms).
		err = fmt.Errorf("the driver's answer for %s is unusable: %w", name, err)
		if _, derr := p.o.Driver.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: prep.req.Secrets}); derr != nil {
			return nil, controller.ProvisioningInBackground, fmt.Errorf("%w; deleting it failed too: %v", err, derr)
		}
		if rerr := p.record.Drop(ctx, claim); rerr != nil {
			logger.Error(rerr, "Removing the in-flight record")
		}
		return nil, controller.ProvisioningFinished, err
	}
	// The library saves the PV after this returns; the reconciler waits for
	// that save before it takes a deleted claim's volume for unsaved.
	p.handoffs.add(claim.UID, claim.ResourceVersion, p.now())
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
func (p *Provisioner) nameFree(name string, claim *v1.PersistentVolumeClaim) error {
	pv, err := p.o.Volumes.Get(name)
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

// protect puts the source's finalizer on it before CreateVolume, through
// package protect, the one writer of the source-protection finalizers.
func (p *Provisioner) protect(ctx context.Context, src *dataSource) error {
	switch {
	case src == nil:
		return nil
	case src.claim != nil:
		return protect.Clone(ctx, p.o.Client, src.claim)
	case src.snapshot != nil:
		return protect.Snapshot(ctx, p.o.SnapshotClient, src.snapshot)
	}
	return nil
}
