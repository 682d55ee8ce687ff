package provisioner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

// PatchFinalizerClient wraps the clientset handed to
// sig-storage-lib-external-provisioner so that its PV Updates that change
// only finalizers (adding or removing the deletion finalizer) go out as
// patches. external-provisioner's ClusterRole grants `patch` on
// persistentvolumes but not `update`; the library (v8) removes the finalizer
// with an Update, which that role refuses.
//
// The patch carries the object's resourceVersion, which the API server
// takes as a precondition: a patch on a changed PV fails with Conflict, as
// the Update would. The library edits the informer's copy in place before
// it updates, so what changed is found against a fresh GET (one read per
// finalizer change: a PV's creation, a deletion, a changed reclaim policy).
// Every other call, and an Update that changes more than finalizers, is
// passed through unchanged.
func PatchFinalizerClient(c kubernetes.Interface) kubernetes.Interface {
	return patchClient{Interface: c}
}

// LibraryClient is the clientset to hand the library: PatchFinalizerClient,
// and a PV that the library creates for a claim names in its claimRef the
// version of the claim that Provision wrote (the in-flight record), not
// that of the library's own copy, which predates the write. The binder
// waits until its cache holds that version of the claim before it binds
// (binder.ClaimBehindVolume); with the older one it would bind from a claim
// that has changed since, and its write would fail with a conflict.
//
// Before the library removes the deletion finalizer from a PV (its reclaim
// policy turned Retain, or its deletion), the in-flight record of the
// claim the PV names is settled (Provisioner.settleBeforeRelease): once the
// finalizer is off, the PV may go at any time, and a record that outlived
// it would have the claim's deletion clean up a volume its PV said to keep.
func (p *Provisioner) LibraryClient(c kubernetes.Interface) kubernetes.Interface {
	return patchClient{Interface: c, hooks: &volumeHooks{claimVersion: p.handoffs.claimVersion, beforeRelease: p.settleBeforeRelease}}
}

// volumeHooks are what LibraryClient adds to the library's PV writes.
type volumeHooks struct {
	claimVersion  func(types.UID) string
	beforeRelease func(context.Context, *v1.PersistentVolume) error
}

type patchClient struct {
	kubernetes.Interface
	hooks *volumeHooks
}

func (c patchClient) CoreV1() typedcorev1.CoreV1Interface {
	return patchCore{CoreV1Interface: c.Interface.CoreV1(), hooks: c.hooks}
}

type patchCore struct {
	typedcorev1.CoreV1Interface
	hooks *volumeHooks
}

func (c patchCore) PersistentVolumes() typedcorev1.PersistentVolumeInterface {
	return patchVolumes{PersistentVolumeInterface: c.CoreV1Interface.PersistentVolumes(), hooks: c.hooks}
}

type patchVolumes struct {
	typedcorev1.PersistentVolumeInterface
	hooks *volumeHooks
}

func (p patchVolumes) Update(ctx context.Context, pv *v1.PersistentVolume, opts metav1.UpdateOptions) (*v1.PersistentVolume, error) {
	current, err := p.Get(ctx, pv.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	patch, kind := FinalizerPatch(current, pv)
	if p.hooks != nil && p.hooks.beforeRelease != nil && kind != PatchConflict &&
		slices.Contains(current.Finalizers, storagehelpers.PVDeletionProtectionFinalizer) &&
		!slices.Contains(pv.Finalizers, storagehelpers.PVDeletionProtectionFinalizer) {
		if err := p.hooks.beforeRelease(ctx, current); err != nil {
			return nil, err
		}
	}
	switch kind {
	case PatchConflict:
		return nil, apierrors.NewConflict(v1.Resource("persistentvolumes"), pv.Name,
			fmt.Errorf("the object has been modified (resourceVersion %s, now %s)", pv.ResourceVersion, current.ResourceVersion))
	case PatchNone:
		return current, nil
	case PatchFinalizers:
		klog.FromContext(ctx).V(4).Info("Updating the PV's finalizers with a patch", "pv", klog.KObj(pv), "finalizers", pv.Finalizers)
		return p.Patch(ctx, pv.Name, types.MergePatchType, patch, metav1.PatchOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager})
	default:
		return p.PersistentVolumeInterface.Update(ctx, pv, opts)
	}
}

// Create sends a copy: the client's encoder sets the object's kind on what
// it is given, and the library puts the PV it saves into the informer's
// store as well, where other goroutines read it (a data race the race
// detector found when a save was retried in the background). With
// claimVersion (LibraryClient), the copy's claimRef gets the version of the
// claim that Provision wrote.
func (p patchVolumes) Create(ctx context.Context, pv *v1.PersistentVolume, opts metav1.CreateOptions) (*v1.PersistentVolume, error) {
	out := pv.DeepCopy()
	if ref := out.Spec.ClaimRef; ref != nil && p.hooks != nil && p.hooks.claimVersion != nil {
		if v := p.hooks.claimVersion(ref.UID); v != "" {
			ref.ResourceVersion = v
		}
	}
	return p.PersistentVolumeInterface.Create(ctx, out, opts)
}

// PatchKind says how an Update is sent.
type PatchKind int

const (
	// PatchUpdate: more than finalizers changed; send the Update.
	PatchUpdate PatchKind = iota
	// PatchFinalizers: only finalizers changed; send the patch.
	PatchFinalizers
	// PatchNone: nothing changed.
	PatchNone
	// PatchConflict: the object changed since it was read.
	PatchConflict
)

// FinalizerPatch compares an updated PV with the current one. When the
// update changes only finalizers, it returns a JSON merge patch of them
// with the resourceVersion as precondition. Pure.
func FinalizerPatch(current, updated *v1.PersistentVolume) ([]byte, PatchKind) {
	if updated.ResourceVersion == "" {
		// The library's own copy of a PV it has just saved (it puts what
		// it sent into the cache, and that can land after the watch's
		// object). Written unconditionally it would undo whatever changed
		// since the save; a conflict makes the library retry with the
		// watch's object.
		return nil, PatchConflict
	}
	if current.ResourceVersion != updated.ResourceVersion {
		return nil, PatchConflict
	}
	same := current.DeepCopy()
	same.Finalizers = updated.Finalizers
	// An informer may drop managed fields; they are the server's anyway.
	same.ManagedFields = updated.ManagedFields
	if !equality.Semantic.DeepEqual(same, updated) {
		return nil, PatchUpdate
	}
	if equality.Semantic.DeepEqual(current.Finalizers, updated.Finalizers) {
		return nil, PatchNone
	}
	finalizers := updated.Finalizers
	if len(finalizers) == 0 {
		finalizers = nil // null removes the field
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": updated.ResourceVersion,
		"finalizers":      finalizers,
	}})
	return patch, PatchFinalizers
}
