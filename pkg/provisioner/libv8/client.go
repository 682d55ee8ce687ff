package libv8

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tether-csi/tether/pkg/inflight"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
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
// finalizer change: a PV's creation, a changed reclaim policy), except for
// the removal after this process deleted the volume, which Client makes
// from its cache's copy (releaseCached). Every other call, and an Update
// that changes more than finalizers, is passed through unchanged.
func PatchFinalizerClient(c kubernetes.Interface) kubernetes.Interface {
	return patchClient{Interface: c}
}

// Client is PatchFinalizerClient with hooks into the library's PV writes
// (see Provisioner.LibraryClient for what they correct).
func Client(c kubernetes.Interface, hooks Hooks) kubernetes.Interface {
	return patchClient{Interface: c, hooks: &hooks}
}

// Hooks are what Client adds to the library's PV writes.
type Hooks struct {
	// ClaimVersion is the version of the claim (by UID) that Provision
	// last wrote, "" for none.
	ClaimVersion func(types.UID) string
	// BeforeRelease runs before the deletion finalizer goes from a PV; an
	// error keeps the finalizer, and the library retries.
	BeforeRelease func(context.Context, *v1.PersistentVolume) error
	// VolumeDeleted says whether this process deleted the volume of the PV
	// of that UID; Released forgets it once its finalizer is off.
	VolumeDeleted func(types.UID) bool
	Released      func(types.UID)
	// Cached, if set, is this process's cached copy of a PV by name (nil
	// if none): the removal of the deletion finalizer after this process
	// deleted the volume starts from it instead of a read (releaseCached).
	Cached func(name string) *v1.PersistentVolume
	// Saves, if set, follows the library's PV saves, and refuses those of
	// a fenced name (Saves.Fence).
	Saves *Saves
}

type patchClient struct {
	kubernetes.Interface
	hooks *Hooks
}

func (c patchClient) CoreV1() typedcorev1.CoreV1Interface {
	return patchCore{CoreV1Interface: c.Interface.CoreV1(), hooks: c.hooks}
}

type patchCore struct {
	typedcorev1.CoreV1Interface
	hooks *Hooks
}

func (c patchCore) PersistentVolumes() typedcorev1.PersistentVolumeInterface {
	return patchVolumes{PersistentVolumeInterface: c.CoreV1Interface.PersistentVolumes(), hooks: c.hooks}
}

type patchVolumes struct {
	typedcorev1.PersistentVolumeInterface
	hooks *Hooks
}

func (p patchVolumes) Update(ctx context.Context, pv *v1.PersistentVolume, opts metav1.UpdateOptions) (*v1.PersistentVolume, error) {
	if out, done, err := p.releaseCached(ctx, pv, opts); done {
		return out, err
	}
	current, err := p.Get(ctx, pv.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if p.hooks != nil && p.hooks.VolumeDeleted != nil && releaseAfterDelete(current, pv, p.hooks.VolumeDeleted(pv.UID)) {
		return p.releaseDeleted(ctx, current, opts)
	}
	patch, kind := FinalizerPatch(current, pv)
	if p.hooks != nil && p.hooks.BeforeRelease != nil && kind != PatchConflict &&
		slices.Contains(current.Finalizers, storagehelpers.PVDeletionProtectionFinalizer) &&
		!slices.Contains(pv.Finalizers, storagehelpers.PVDeletionProtectionFinalizer) {
		if err := p.hooks.BeforeRelease(ctx, current); err != nil {
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

// releaseAfterDelete reports whether the library's Update of a PV is the
// removal of its deletion finalizer after this process deleted its volume
// (deleted): the PV it was read from is the one on the server (same UID),
// which still has the finalizer, and the update has it no more. Whatever
// else changed on the PV since the library's copy was read, that removal
// stays right: the volume is gone. Pure.
func releaseAfterDelete(current, updated *v1.PersistentVolume, deleted bool) bool {
	return deleted && updated.UID != "" && current.UID == updated.UID &&
		slices.Contains(current.Finalizers, storagehelpers.PVDeletionProtectionFinalizer) &&
		!slices.Contains(updated.Finalizers, storagehelpers.PVDeletionProtectionFinalizer)
}

// releaseCached removes the deletion finalizer from a PV whose volume this
// process deleted without reading the PV first: one JSON patch (RFC 6902)
// whose tests make the API server check what the removal rests on, that
// the PV is the one of that UID and that the finalizer is where the cached
// copy has it, and which removes that finalizer and nothing else. Whatever
// else changed on the PV since, the removal stays right (releaseAfterDelete).
// done is false when it does not apply or the API server refused the
// patch's tests: the caller then goes on from a fresh read.
func (p patchVolumes) releaseCached(ctx context.Context, pv *v1.PersistentVolume, opts metav1.UpdateOptions) (out *v1.PersistentVolume, done bool, err error) {
	h := p.hooks
	if h == nil || h.Cached == nil || h.VolumeDeleted == nil || pv.UID == "" ||
		slices.Contains(pv.Finalizers, storagehelpers.PVDeletionProtectionFinalizer) || !h.VolumeDeleted(pv.UID) {
		return nil, false, nil
	}
	cached := h.Cached(pv.Name)
	if cached == nil || cached.UID != pv.UID {
		return nil, false, nil
	}
	patch, ok := FinalizerRemoval(cached, storagehelpers.PVDeletionProtectionFinalizer)
	if !ok {
		return nil, false, nil
	}
	if h.BeforeRelease != nil {
		if err := h.BeforeRelease(ctx, cached); err != nil {
			return nil, true, err
		}
	}
	out, err = p.Patch(ctx, pv.Name, types.JSONPatchType, patch, metav1.PatchOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager})
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		out = nil // the PV is gone
	default:
		klog.FromContext(ctx).V(4).Info("Removing the deletion finalizer from the cached copy failed; reading the PV", "pv", klog.KObj(pv), "err", err)
		return nil, false, nil
	}
	h.Released(pv.UID)
	klog.FromContext(ctx).V(4).Info("Removed the deletion finalizer of a deleted volume's PV, from the cached copy", "pv", klog.KObj(pv))
	return out, true, err
}

// FinalizerRemoval is the JSON patch that removes finalizer from pv where
// pv has it, on condition that the object patched has pv's UID and that
// finalizer at that place; ok is false if pv does not have it. Pure.
func FinalizerRemoval(pv *v1.PersistentVolume, finalizer string) (patch []byte, ok bool) {
	i := slices.Index(pv.Finalizers, finalizer)
	if i < 0 || pv.UID == "" {
		return nil, false
	}
	at := fmt.Sprintf("/metadata/finalizers/%d", i)
	patch, _ = json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(pv.UID)},
		{"op": "test", "path": at, "value": finalizer},
		{"op": "remove", "path": at},
	})
	return patch, true
}

// releaseDeleted removes the deletion finalizer from a PV whose volume is
// deleted, starting from current: a patch of the finalizers with the read's
// resourceVersion, and on a conflict (kube-controller-manager's
// pv-protection, the PV's deletion) the same from a fresh read. The claim's
// in-flight record is settled first, as for any release.
func (p patchVolumes) releaseDeleted(ctx context.Context, current *v1.PersistentVolume, opts metav1.UpdateOptions) (*v1.PersistentVolume, error) {
	uid, name := current.UID, current.Name
	if p.hooks.BeforeRelease != nil {
		if err := p.hooks.BeforeRelease(ctx, current); err != nil {
			return nil, err
		}
	}
	logger := klog.FromContext(ctx).WithValues("pv", klog.KObj(current))
	var out *v1.PersistentVolume
	tries := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tries++
		if current == nil {
			fresh, err := p.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			current = fresh
		}
		out = current
		if current.UID != uid || !slices.Contains(current.Finalizers, storagehelpers.PVDeletionProtectionFinalizer) {
			return nil // replaced, or released already
		}
		updated := current.DeepCopy()
		updated.Finalizers = slices.DeleteFunc(updated.Finalizers, func(f string) bool { return f == storagehelpers.PVDeletionProtectionFinalizer })
		patch, _ := FinalizerPatch(current, updated)
		current = nil
		released, err := p.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager})
		if err == nil {
			out = released
		}
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	p.hooks.Released(uid)
	logger.V(4).Info("Removed the deletion finalizer of a deleted volume's PV", "tries", tries)
	if err != nil {
		return nil, err // NotFound: the PV is gone
	}
	return out, nil
}

// Create sends a copy: the client's encoder sets the object's kind on what
// it is given, and the library puts the PV it saves into the informer's
// store as well, where other goroutines read it (a data race the race
// detector found when a save was retried in the background). With
// claimVersion (LibraryClient), the copy's claimRef gets the version of the
// claim that Provision wrote.
//
// With Saves, a save of a fenced name is answered AlreadyExists without
// reaching the API server: the library takes that for saved and stops
// trying, and the volume it names has been, or is being, cleaned up.
func (p patchVolumes) Create(ctx context.Context, pv *v1.PersistentVolume, opts metav1.CreateOptions) (*v1.PersistentVolume, error) {
	out := pv.DeepCopy()
	if ref := out.Spec.ClaimRef; ref != nil && p.hooks != nil && p.hooks.ClaimVersion != nil {
		inflight.RelayClaimVersion(out, p.hooks.ClaimVersion(ref.UID))
	}
	if p.hooks == nil || p.hooks.Saves == nil {
		return p.PersistentVolumeInterface.Create(ctx, out, opts)
	}
	if !p.hooks.Saves.begin(pv.Name) {
		klog.FromContext(ctx).Info("Not saving the PV: its volume was cleaned up after its save had failed for longer than the save grace", "pv", klog.KObj(pv))
		return nil, apierrors.NewAlreadyExists(v1.Resource("persistentvolumes"), pv.Name)
	}
	created, err := p.PersistentVolumeInterface.Create(ctx, out, opts)
	p.hooks.Saves.end(pv.Name, err == nil || apierrors.IsAlreadyExists(err))
	return created, err
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
