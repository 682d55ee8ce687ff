package protect

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// FinalizerCloneSource keeps a clone's source claim from being deleted
// while the driver copies it; external-provisioner uses the same name.
const FinalizerCloneSource = "provisioner.storage.kubernetes.io/cloning-protection"

// Clone adds FinalizerCloneSource to a clone's source claim src, as read
// and checked before CreateVolume. Clones of one source made at once each
// add it: a write that conflicts (another clone's, or any change of the
// source) is made again from a fresh read, as long as that read is still
// the source that was checked (cloneDecision), instead of failing the
// clone's provisioning. A source that holds the finalizer already is not
// written.
func Clone(ctx context.Context, client kubernetes.Interface, src *v1.PersistentVolumeClaim) error {
	checked, current := src, src
	claims := client.CoreV1().PersistentVolumeClaims(src.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if current == nil {
			fresh, err := claims.Get(ctx, src.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			current = fresh
		}
		add, err := cloneDecision(checked, current)
		if err != nil || !add {
			return err
		}
		c := current.DeepCopy()
		c.Finalizers = append(c.Finalizers, FinalizerCloneSource)
		current = nil
		_, err = claims.Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("protecting clone source %s: %w", src.Name, err)
	}
	return nil
}

// releaseClaim removes FinalizerCloneSource from a fresh copy of the
// claim (the same UID), retrying conflicts. A claim that is gone needs
// nothing.
func releaseClaim(ctx context.Context, client kubernetes.Interface, src *v1.PersistentVolumeClaim) error {
	claims := client.CoreV1().PersistentVolumeClaims(src.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh, err := claims.Get(ctx, src.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if fresh.UID != src.UID || !slices.Contains(fresh.Finalizers, FinalizerCloneSource) {
			return nil
		}
		fresh.Finalizers = slices.DeleteFunc(fresh.Finalizers, func(f string) bool { return f == FinalizerCloneSource })
		_, err = claims.Update(ctx, fresh, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// cloneDecision says, on a read of a clone's source claim (current),
// whether the cloning finalizer must be added to it: not when it holds it
// already; an error when it is no longer the source that was checked
// (checked): another claim of the name, or, unprotected, one being deleted
// or bound to another volume. Pure.
func cloneDecision(checked, current *v1.PersistentVolumeClaim) (bool, error) {
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

// CloneSourceName is the name of the claim that claim is cloned from, in
// its own namespace: spec.dataSource, else spec.dataSourceRef, of kind
// PersistentVolumeClaim in the core group. A dataSourceRef into another
// namespace is not a clone source here.
func CloneSourceName(claim *v1.PersistentVolumeClaim) (string, bool) {
	if ds := claim.Spec.DataSource; ds != nil && isClaimKind(ds.Kind, ds.APIGroup) && ds.Name != "" {
		return ds.Name, true
	}
	if ref := claim.Spec.DataSourceRef; ref != nil && isClaimKind(ref.Kind, ref.APIGroup) && ref.Name != "" &&
		(ref.Namespace == nil || *ref.Namespace == "" || *ref.Namespace == claim.Namespace) {
		return ref.Name, true
	}
	return "", false
}

func isClaimKind(kind string, group *string) bool {
	return kind == "PersistentVolumeClaim" && (group == nil || *group == "")
}

// CloneInProgress reports whether a clone of src may still be copying it,
// and names that clone. claims may hold any claims; only those of src's
// namespace that name src as their source count. A clone is in progress
// when:
//   - it is being deleted and still holds tether's in-flight record: its
//     CreateVolume may still run (or be repeated by the clean-up) until
//     the record goes;
//   - it is live and not bound yet (no spec.volumeName), as in
//     external-provisioner, where a Pending clone keeps its source;
//   - it is bound, but its in-flight record names another volume than the
//     one it is bound to: its own CreateVolume may still run.
//
// A bound clone is otherwise done: its volume exists and a PV tracks it.
// Whether src itself is being deleted does not matter: that is what the
// protection is for.
func CloneInProgress(src *v1.PersistentVolumeClaim, claims []*v1.PersistentVolumeClaim) (bool, string) {
	for _, c := range claims {
		if c.Namespace != src.Namespace || c.UID == src.UID {
			continue
		}
		if name, ok := CloneSourceName(c); !ok || name != src.Name {
			continue
		}
		if makingVolume(c) {
			return true, c.Name
		}
	}
	return false, ""
}
