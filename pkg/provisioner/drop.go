package provisioner

import (
	"context"
	"fmt"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/records"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// recordedVolume is the volume name a claim's record is for under this
// provisioner's settings (records.Volume).
func (p *Provisioner) recordedVolume(claim *v1.PersistentVolumeClaim) string {
	return records.Volume(claim, p.o.Request.VolumeNamePrefix, p.o.Request.VolumeNameUUIDLen)
}

// dropRecord drops a claim's in-flight record and forgets what this
// process remembers of the claim's calls.
func (p *Provisioner) dropRecord(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	if err := p.record.Drop(ctx, claim); err != nil {
		return err
	}
	p.handoffs.forget(claim.UID)
	p.secretsUsed.forget(claim.UID)
	p.answers.forget(claim.UID)
	return nil
}

// dropBeforeRelease drops the in-flight record of the claim a PV names,
// before the library removes the PV's deletion finalizer. Until then the
// PV cannot go without the library's own delete; after, an admin may keep
// the volume (reclaim policy Retain) and delete the PV at once, before
// the reconciler or the binder saw it, and a record left behind would have
// the claim's deletion find the volume again and delete it. The claim is
// read from the API server, unless the claim watch delivered its deletion
// (Options.GoneClaims): a deleted claim holds no record, and its UID never
// comes back. A record that is not this claim's for this very PV is left
// alone. A claim whose clean-up or provisioning is under
// way is busy, and a record of a format this provisioner does not read
// is not its to drop: the error keeps the finalizer, and the library
// retries.
func (p *Provisioner) dropBeforeRelease(ctx context.Context, pv *v1.PersistentVolume) error {
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.UID == "" || (p.o.GoneClaims != nil && p.o.GoneClaims.Has(ref.UID)) {
		return nil
	}
	claim, err := p.o.Client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading claim %s/%s before releasing PV %s: %w", ref.Namespace, ref.Name, pv.Name, err)
	}
	if claim.UID != ref.UID || !inflight.Holds(claim) || p.recordedVolume(claim) != pv.Name {
		return nil
	}
	if driver, _, ok := inflight.Volume(claim); ok && driver != p.o.Driver.DriverName() {
		return nil
	}
	if inflight.Unread(claim) {
		// Released with the record left, the PV could go (Retain) while a
		// provisioner that reads the record takes its volume for unsaved.
		return fmt.Errorf("claim %s/%s holds an in-flight record of format %q, which this provisioner does not read: PV %s keeps its finalizer until a provisioner that reads it settles the record (docs/upgrade.md)",
			ref.Namespace, ref.Name, claim.Annotations[inflight.AnnFormat], pv.Name)
	}
	unlock, ok := p.locks.TryLock(string(claim.UID))
	if !ok {
		return fmt.Errorf("claim %s/%s is busy: PV %s keeps its finalizer until the claim's in-flight record is settled", ref.Namespace, ref.Name, pv.Name)
	}
	defer unlock()
	klog.FromContext(ctx).V(2).Info("Settling the in-flight record before the PV's finalizer goes", "pvc", klog.KObj(claim), "pv", klog.KObj(pv))
	return p.dropRecord(ctx, claim)
}
