package binder

import (
	"context"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/migration"
)

// Writer applies decisions to the API. It is the only part of the binder
// that writes claims and PVs (make lint checks it: hack/writers). Every
// update or patch (a merge patch of what changed where the cache holds
// less than the server: patch.go; a node-loss release's marks:
// apply_nodeloss.go) carries the resourceVersion it was decided on, so a
// concurrent change makes it fail with a conflict instead of overwriting;
// the caller then decides again from fresh state. Every deletion (node
// loss) carries the object's UID. Every object a write returns goes into
// the caches, so the next decision never sees an older version than the
// binder's own.
type Writer struct {
	Client   kubernetes.Interface
	Recorder record.EventRecorder
	Volumes  *Index
	Claims   *Store[*v1.PersistentVolumeClaim]
	Metrics  *Metrics
	// keepRecords leaves the provisioner's in-flight record on a claim it
	// binds, as KCM's binder does (the simulator's stand-in for KCM).
	keepRecords bool
	// patchAll: see Options.PatchAll.
	patchAll func() bool
}

// ApplyClaim carries out a claim decision.
func (w *Writer) ApplyClaim(ctx context.Context, claim *v1.PersistentVolumeClaim, d ClaimDecision) error {
	if d.Event != nil {
		w.Recorder.Event(claim, d.Event.Type, d.Event.Reason, d.Event.Message)
	}
	switch d.Op {
	case ClaimBind:
		return w.bind(ctx, claim, d.Volume)
	case ClaimLost:
		_, err := w.claimPhase(ctx, claim, v1.ClaimLost, nil)
		return err
	case ClaimSetClass:
		c := claim.DeepCopy()
		c.Spec.StorageClassName = &d.Class
		_, err := w.writeClaim(ctx, claim, c, false)
		return err
	case ClaimProvision:
		if claim.Annotations[storagehelpers.AnnStorageProvisioner] != d.Provisioner ||
			claim.Annotations[storagehelpers.AnnBetaStorageProvisioner] != d.Provisioner ||
			claim.Annotations[storagehelpers.AnnMigratedTo] != d.MigratedTo {
			c := claim.DeepCopy()
			metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnStorageProvisioner, d.Provisioner)
			metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnBetaStorageProvisioner, d.Provisioner)
			if d.MigratedTo != "" {
				metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnMigratedTo, d.MigratedTo)
			} else {
				delete(c.Annotations, storagehelpers.AnnMigratedTo)
			}
			var err error
			if claim, err = w.writeClaim(ctx, claim, c, false); err != nil {
				return err
			}
		}
		_, err := w.claimPhase(ctx, claim, v1.ClaimPending, nil)
		return err
	default:
		_, err := w.claimPhase(ctx, claim, v1.ClaimPending, nil)
		return err
	}
}

// bind links claim and volume in four idempotent steps, in the order that
// kube-controller-manager uses, so that a crash between any two leaves a
// state that the next sync finishes: PV claimRef, PV phase, claim
// volumeName and annotations, claim phase.
func (w *Writer) bind(ctx context.Context, claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) error {
	logger := klog.FromContext(ctx)
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Namespace != claim.Namespace || ref.Name != claim.Name || ref.UID != claim.UID {
		p := pv.DeepCopy()
		if ref == nil || ref.Namespace != claim.Namespace || ref.Name != claim.Name {
			// We make the link (a user's pre-binding only lacks the UID).
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, storagehelpers.AnnBoundByController, "yes")
		}
		p.Spec.ClaimRef = &v1.ObjectReference{
			Kind: "PersistentVolumeClaim", APIVersion: "v1",
			Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID,
			ResourceVersion: claim.ResourceVersion,
		}
		var err error
		if pv, err = w.writeVolume(ctx, pv, p, false); err != nil {
			return err
		}
		logger.V(4).Info("Volume claimRef set", "pv", klog.KObj(pv), "pvc", klog.KObj(claim))
	}
	if pv.Status.Phase != v1.VolumeBound {
		var err error
		if pv, err = w.volumePhase(ctx, pv, v1.VolumeBound, ""); err != nil {
			return err
		}
	}
	if claim.Spec.VolumeName != pv.Name || !BindCompleted(claim) ||
		(claim.Spec.VolumeName == "" && !metav1.HasAnnotation(claim.ObjectMeta, storagehelpers.AnnBoundByController)) {
		c := claim.DeepCopy()
		if c.Spec.VolumeName != pv.Name {
			c.Spec.VolumeName = pv.Name
			metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnBoundByController, "yes")
		}
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
		// The provisioner's in-flight record goes in the same write: the
		// PV that tracks the claim's volume is saved (saves it a write).
		// A record of a format this binder does not read stays, for a
		// provisioner that reads it (docs/upgrade.md).
		if !w.keepRecords && !inflight.Settle(c, pv) && inflight.Unread(c) {
			format := c.Annotations[inflight.AnnFormat]
			w.Recorder.Eventf(claim, v1.EventTypeWarning, "InFlightRecordUnread",
				"left the claim's in-flight record as it is: its format %q is not one this binder reads (1 to %d); a provisioner that reads it drops it (docs/upgrade.md)", format, inflight.FormatRead)
			w.Metrics.observeUnreadRecord()
		}
		var err error
		if claim, err = w.writeClaim(ctx, claim, c, false); err != nil {
			return err
		}
	}
	updated, err := w.claimPhase(ctx, claim, v1.ClaimBound, pv)
	if err == nil && updated {
		logger.V(2).Info("Claim bound", "pvc", klog.KObj(claim), "pv", klog.KObj(pv))
		w.Metrics.observeBound(claim)
	}
	return err
}

// claimPhase writes the claim's phase, and with it the access modes and
// (when the claim becomes Bound) the capacity of pv; nil clears them. It
// reports whether it wrote.
func (w *Writer) claimPhase(ctx context.Context, claim *v1.PersistentVolumeClaim, phase v1.PersistentVolumeClaimPhase, pv *v1.PersistentVolume) (bool, error) {
	c := claim.DeepCopy()
	c.Status.Phase = phase
	if pv == nil {
		c.Status.AccessModes, c.Status.Capacity = nil, nil
		c.Status.CurrentVolumeAttributesClassName = nil
	} else {
		c.Status.AccessModes = pv.Spec.AccessModes
		// Set the capacity only when becoming Bound: after that a
		// difference can be deliberate (a resized filesystem).
		if claim.Status.Phase != phase || c.Status.Capacity == nil {
			c.Status.Capacity = CapacityOnBind(claim.Status.Capacity, pv)
		}
		// As KCM: the volume's attributes class only when Pending becomes
		// Bound; after that it is the resizer's (ModifyVolume), or an
		// admin's.
		if claim.Status.Phase == v1.ClaimPending && phase == v1.ClaimBound {
			c.Status.CurrentVolumeAttributesClassName = copyName(pv.Spec.VolumeAttributesClassName)
		}
	}
	if c.Status.Phase == claim.Status.Phase && slices.Equal(c.Status.AccessModes, claim.Status.AccessModes) &&
		equalResources(c.Status.Capacity, claim.Status.Capacity) &&
		ptr.Equal(c.Status.CurrentVolumeAttributesClassName, claim.Status.CurrentVolumeAttributesClassName) {
		return false, nil
	}
	if _, err := w.writeClaim(ctx, claim, c, true); err != nil {
		return false, err
	}
	return true, nil
}

// AnnPreResizeCapacity on a volume is its size before a resize whose
// filesystem part is still to be done (kubernetes' volume util names it).
const AnnPreResizeCapacity = "volume.alpha.kubernetes.io/pre-resize-capacity"

// CapacityOnBind is the status capacity of a claim that becomes bound to
// pv, current being the claim's before. As KCM's binder: the volume's
// capacity; but a volume whose device was grown while its filesystem was
// not (AnnPreResizeCapacity) gives the claim that annotation's size as its
// storage, so that the resizer still grows the filesystem, and the claim
// keeps its other entries. An annotation that does not parse counts as
// the volume's storage capacity.
func CapacityOnBind(current v1.ResourceList, pv *v1.PersistentVolume) v1.ResourceList {
	pre, ok := pv.Annotations[AnnPreResizeCapacity]
	if !ok {
		return maps.Clone(pv.Spec.Capacity)
	}
	q, err := resource.ParseQuantity(pre)
	if err != nil {
		q = pv.Spec.Capacity[v1.ResourceStorage]
	}
	out := maps.Clone(current)
	if out == nil {
		out = v1.ResourceList{}
	}
	out[v1.ResourceStorage] = q
	return out
}

func copyName(s *string) *string {
	if s == nil {
		return nil
	}
	return ptr.To(*s)
}

func equalResources(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, qa := range a {
		qb, ok := b[k]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

func (w *Writer) volumePhase(ctx context.Context, pv *v1.PersistentVolume, phase v1.PersistentVolumePhase, message string) (*v1.PersistentVolume, error) {
	if pv.Status.Phase == phase && pv.Status.Message == message {
		return pv, nil
	}
	p := pv.DeepCopy()
	p.Status.Phase, p.Status.Message = phase, message
	return w.writeVolume(ctx, pv, p, true)
}

// ApplyVolume carries out a volume decision. The claim event, if any, goes
// on claim.
func (w *Writer) ApplyVolume(ctx context.Context, pv *v1.PersistentVolume, claim *v1.PersistentVolumeClaim, d VolumeDecision) error {
	if d.Event != nil {
		w.Recorder.Event(pv, d.Event.Type, d.Event.Reason, d.Event.Message)
	}
	if d.ClaimEvent != nil && claim != nil {
		w.Recorder.Event(claim, d.ClaimEvent.Type, d.ClaimEvent.Reason, d.ClaimEvent.Message)
	}
	if d.Anneal {
		p := pv.DeepCopy()
		if migration.AnnealVolume(p) {
			var err error
			if pv, err = w.writeVolume(ctx, pv, p, false); err != nil {
				return err
			}
		}
	}
	if d.Unbind != KeepClaimRef {
		p := pv.DeepCopy()
		if d.Unbind == ClearClaimRef {
			p.Spec.ClaimRef = nil
			delete(p.Annotations, storagehelpers.AnnBoundByController)
		} else {
			p.Spec.ClaimRef.UID = ""
			p.Spec.ClaimRef.ResourceVersion = ""
		}
		var err error
		if pv, err = w.writeVolume(ctx, pv, p, false); err != nil {
			return err
		}
		klog.FromContext(ctx).V(2).Info("Volume unbound", "pv", klog.KObj(pv))
	}
	if d.Phase != "" {
		_, err := w.volumePhase(ctx, pv, d.Phase, d.Message)
		return err
	}
	return nil
}
