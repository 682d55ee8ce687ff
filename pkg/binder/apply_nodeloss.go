package binder

import (
	"context"
	"encoding/json"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The Writer's writes of a release for node loss. What to write, and the
// API server's word that it may be written, are the node-loss glue's
// (nodeloss_apply.go); these only write, each with a precondition: a PV's
// metadata with the version it was decided on (a change meanwhile is a
// conflict, and the sync decides again), a deletion with the object's UID.

// markVolume sets the given annotations of pv (a nil value removes one).
func (w *Writer) markVolume(ctx context.Context, pv *v1.PersistentVolume, marks map[string]any) error {
	return w.patchVolumeMeta(ctx, pv, map[string]any{"annotations": marks})
}

// dropVolumeFinalizer removes finalizer from pv's finalizers.
func (w *Writer) dropVolumeFinalizer(ctx context.Context, pv *v1.PersistentVolume, finalizer string) error {
	kept := slices.DeleteFunc(slices.Clone(pv.Finalizers), func(f string) bool { return f == finalizer })
	if kept == nil {
		kept = []string{}
	}
	return w.patchVolumeMeta(ctx, pv, map[string]any{"finalizers": kept})
}

// patchVolumeMeta writes the given members of a PV's metadata (a list is
// replaced whole) with a merge patch that carries the version they were
// decided on, and takes the answer into the index. A patch, not an
// update: nothing the binder's cache does not hold is written back.
func (w *Writer) patchVolumeMeta(ctx context.Context, pv *v1.PersistentVolume, meta map[string]any) error {
	meta["resourceVersion"] = pv.ResourceVersion
	data, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	out, err := w.Client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, data, metav1.PatchOptions{})
	if err != nil {
		return err
	}
	w.Volumes.Returned(out)
	return nil
}

// deleteClaim deletes the claim ref names, only if it still has ref's
// UID. A claim already gone, or another of that name, is no error: that
// claim is gone either way.
func (w *Writer) deleteClaim(ctx context.Context, ref *v1.ObjectReference) error {
	err := w.Client.CoreV1().PersistentVolumeClaims(ref.Namespace).Delete(ctx, ref.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ref.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// deleteVolume deletes pv, only if it still has pv's UID. A PV already
// gone, or another of that name, is no error.
func (w *Writer) deleteVolume(ctx context.Context, pv *v1.PersistentVolume) error {
	err := w.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}
