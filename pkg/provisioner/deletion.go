package provisioner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/nodeloss"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
)

// ShouldDelete takes only the PVs of this provisioner's driver and, in
// node-deployment mode, only those on its node; never a PV whose claim the
// binder released for node loss (its volume is left to its node's sweep).
func (p *Provisioner) ShouldDelete(ctx context.Context, pv *v1.PersistentVolume) bool {
	if nodeloss.Released(pv) {
		return false
	}
	if pv, err := p.csiVolume(ctx, pv); err != nil || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != p.o.Driver.DriverName() {
		return false
	}
	return p.o.Node == nil || p.onOwnNode(pv)
}

// Answers is ShouldDelete for the reclaimer of static PVs (package static),
// but for an error while this node is not in the node cache in
// node-deployment mode (its informer not synced, or the node deleted and
// made again): then it cannot tell, and the PV is looked at again.
func (p *Provisioner) Answers(ctx context.Context, pv *v1.PersistentVolume) (bool, error) {
	if p.o.Node != nil {
		if _, err := p.o.Nodes.Get(p.o.Node.NodeName); err != nil {
			return false, fmt.Errorf("this node %s is not in the node cache yet: %w", p.o.Node.NodeName, err)
		}
	}
	return p.ShouldDelete(ctx, pv), nil
}

// Delete deletes a Released volume's backend volume; the library then
// removes the PV's finalizer. For a driver with PUBLISH_UNPUBLISH_VOLUME it
// waits while a VolumeAttachment still names the PV (waitForDetach).
func (p *Provisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	pv, err := p.csiVolume(ctx, pv)
	if err != nil {
		return err
	}
	if pv.Spec.CSI == nil {
		return &controller.IgnoredError{Reason: "not a CSI volume"}
	}
	if err := p.stillToDelete(ctx, pv); err != nil {
		return err
	}
	if err := p.waitForDetach(ctx, pv); err != nil {
		return err
	}
	// An empty deletion secret annotation (EP writes them on every PV) is
	// no secret; see request.DeletionSecretRef.
	secrets, err := p.deletionSecrets(ctx, pv)
	if err != nil {
		return err
	}
	if _, err := p.o.Driver.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle, Secrets: secrets}); err != nil {
		return fmt.Errorf("DeleteVolume %s: %w", pv.Spec.CSI.VolumeHandle, err)
	}
	// The library removes the PV's deletion finalizer next: a conflict
	// there is retried alone (LibraryClient), not with this DeleteVolume.
	p.deleted.add(pv.UID, struct{}{}, p.now())
	klog.FromContext(ctx).V(2).Info("Volume deleted", "pv", klog.KObj(pv), "handle", pv.Spec.CSI.VolumeHandle)
	p.changed(pv)
	return nil
}

// stillToDelete checks on the API server's copy of a PV that its volume
// is still to be deleted: the library decides on its cache, and an admin
// may have patched the PV to Retain since, to keep the disk, or this
// process deleted the volume already and removed the PV's deletion
// finalizer, which the cache has not seen yet. An
// IgnoredError makes the library leave the PV alone.
func (p *Provisioner) stillToDelete(ctx context.Context, pv *v1.PersistentVolume) error {
	fresh, err := p.o.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return &controller.IgnoredError{Reason: "the PV is gone"}
	case err != nil:
		return err
	case pv.UID != "" && fresh.UID != pv.UID:
		return &controller.IgnoredError{Reason: "the PV was replaced by another of the same name"}
	case fresh.DeletionTimestamp != nil && !slices.Contains(fresh.Finalizers, storagehelpers.PVDeletionProtectionFinalizer):
		// The library's own rule, on the API server's copy: its deletion
		// finalizer is off a PV being deleted once the volume is gone. A
		// cache that has not seen the removal yet would delete it again.
		return &controller.IgnoredError{Reason: "the PV is being deleted and its deletion finalizer is off: its volume is deleted already"}
	case fresh.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete:
		return &controller.IgnoredError{Reason: "the PV's reclaim policy is now " + string(fresh.Spec.PersistentVolumeReclaimPolicy)}
	case nodeloss.Released(fresh):
		return &controller.IgnoredError{Reason: "the binder released its claim for node loss: no DeleteVolume, the volume is left to its node's orphan sweep"}
	}
	return nil
}

// WatchDetach makes a PV whose deletion waited for a detach go back to the
// library as soon as the last VolumeAttachment that held it is deleted.
// Without it, a driver with PUBLISH_UNPUBLISH_VOLUME still waits, but
// through the library's retries (each a Warning event).
func (p *Provisioner) WatchDetach(o DetachOptions) error {
	if o.VolumeAttachments == nil || o.Requeue == nil {
		return errors.New("provisioner: the wait for detach needs the VolumeAttachment informer and a requeue")
	}
	_, err := o.VolumeAttachments.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		va, ok := obj.(*storagev1.VolumeAttachment)
		if !ok || va.Spec.Source.PersistentVolumeName == nil {
			return
		}
		if pv := *va.Spec.Source.PersistentVolumeName; p.detach.release(pv) {
			o.Requeue(pv)
		}
	}})
	if err != nil {
		return err
	}
	p.detach.mu.Lock()
	p.detach.o = &o
	p.detach.mu.Unlock()
	return nil
}

// waitForDetach returns nil when the PV's volume may be deleted now, else
// an IgnoredError after a Normal event (WatchDetach hands the PV back
// later), or, without WatchDetach, a plain error the library retries.
func (p *Provisioner) waitForDetach(ctx context.Context, pv *v1.PersistentVolume) error {
	if !p.o.PublishUnpublish {
		return nil
	}
	last := p.detach.arm(pv.Name)
	vas, err := p.o.VolumeAttachments.List(labels.Everything())
	if err != nil {
		p.detach.release(pv.Name)
		return err
	}
	now := p.now()
	step := decideDetach(detachInput{PublishUnpublish: true, PV: pv.Name, Attachments: vas, LastEvent: last, Now: now})
	if !step.Wait {
		p.detach.release(pv.Name)
		return nil
	}
	msg := fmt.Sprintf("waiting for the volume to be detached from node %s (VolumeAttachment %s) before it is deleted", step.Node, step.Attachment)
	o := p.detach.options()
	if o == nil {
		p.detach.release(pv.Name)
		return errors.New(msg)
	}
	logger := klog.FromContext(ctx)
	if step.Event {
		p.detach.told(pv.Name, now)
		if o.Recorder != nil {
			o.Recorder.Event(pv, v1.EventTypeNormal, ReasonVolumeDelete, strings.ToUpper(msg[:1])+msg[1:])
		}
	}
	logger.V(2).Info("DeleteVolume waits for a detach", "pv", klog.KObj(pv), "node", step.Node, "volumeAttachment", step.Attachment)
	return &controller.IgnoredError{Reason: msg}
}

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
	secrets, err := p.readSecret(ctx, ref)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		klog.FromContext(ctx).Info("Deleting the volume without its deletion secret, which cannot be read", "pv", klog.KObj(pv),
			"secret", klog.KRef(ref.Namespace, ref.Name), "reason", apierrors.ReasonForError(err))
		return nil, nil
	}
	return secrets, err
}
