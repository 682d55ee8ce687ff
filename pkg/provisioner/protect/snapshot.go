package protect

import (
	"context"
	"fmt"
	"slices"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// FinalizerSnapshotSource keeps a VolumeSnapshot while a volume is restored
// from it; external-provisioner uses the same name.
const FinalizerSnapshotSource = "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection"

// Snapshot adds FinalizerSnapshotSource to a restore's snapshot, as read
// and checked before CreateVolume. Restores from one snapshot made at once
// each add it: a write that conflicts is made again from a fresh read, as
// long as that read is still the snapshot that was checked
// (snapshotDecision). A snapshot that holds the finalizer already is not
// written.
func Snapshot(ctx context.Context, client snapclientset.Interface, snap *snapv1.VolumeSnapshot) error {
	current := snap
	snaps := client.SnapshotV1().VolumeSnapshots(snap.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if current == nil {
			fresh, err := snaps.Get(ctx, snap.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			current = fresh
		}
		add, err := snapshotDecision(snap, current)
		if err != nil || !add {
			return err
		}
		s := current.DeepCopy()
		s.Finalizers = append(s.Finalizers, FinalizerSnapshotSource)
		current = nil
		_, err = snaps.Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("protecting snapshot %s: %w", snap.Name, err)
	}
	return nil
}

// snapshotDecision says, on a read of a restore's snapshot (current),
// whether its protection must be added: not when it holds it already (a
// restore retried while the snapshot is being deleted); an error when it
// is no longer the snapshot that was checked: another of the name, or,
// unprotected, one being deleted or bound to another content. Pure.
func snapshotDecision(checked, current *snapv1.VolumeSnapshot) (bool, error) {
	content := func(s *snapv1.VolumeSnapshot) string {
		if s.Status == nil || s.Status.BoundVolumeSnapshotContentName == nil {
			return ""
		}
		return *s.Status.BoundVolumeSnapshotContentName
	}
	switch {
	case current.UID != checked.UID:
		return false, fmt.Errorf("snapshot %s was replaced", checked.Name)
	case slices.Contains(current.Finalizers, FinalizerSnapshotSource):
		return false, nil
	case current.DeletionTimestamp != nil:
		return false, fmt.Errorf("snapshot %s is being deleted", checked.Name)
	case content(current) != content(checked):
		return false, fmt.Errorf("snapshot %s is bound to another content now", checked.Name)
	}
	return true, nil
}

// SnapshotSourceName is the name of the VolumeSnapshot a claim is restored
// from, in its own namespace.
func SnapshotSourceName(claim *v1.PersistentVolumeClaim) (string, bool) {
	ds, err := request.DataSourceOf(claim)
	if err != nil || ds.Kind != request.SnapshotSource {
		return "", false
	}
	return ds.Name, true
}

// RestoreInProgress reports whether a restore from snap may still be
// running, and names its claim. A restore is in progress as a clone is
// (see CloneInProgress): a claim being deleted that still holds its
// in-flight record, a live claim not bound yet (as the snapshot-controller
// and external-provisioner's sweep count them), and a bound claim whose
// record names another volume than its own.
func RestoreInProgress(snap *snapv1.VolumeSnapshot, claims []*v1.PersistentVolumeClaim) (bool, string) {
	for _, c := range claims {
		if c.Namespace != snap.Namespace {
			continue
		}
		if name, ok := SnapshotSourceName(c); !ok || name != snap.Name {
			continue
		}
		if makingVolume(c) {
			return true, c.Name
		}
	}
	return false, ""
}
