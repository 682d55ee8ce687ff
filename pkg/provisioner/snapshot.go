package provisioner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/utils/ptr"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
)

// Restores from a VolumeSnapshot, as external-provisioner v6.3.0 does them:
// the snapshot must be ready, bound to a VolumeSnapshotContent of this
// driver that points back at it, with a restore size no larger than the
// request; a change of volume mode needs the content's
// request.AnnAllowVolumeModeChange while --prevent-volume-mode-conversion is on.
// Provision puts protect.FinalizerSnapshotSource on the snapshot before
// CreateVolume and protect.SnapshotProtection takes it off once no restore
// from it is in progress, so that the clean-up of a deleted claim finds it
// again.

// source is a claim's checked content source, with the object to protect.
type source struct {
	content  *csi.VolumeContentSource
	claim    *v1.PersistentVolumeClaim // a clone's source claim
	snapshot *snapv1.VolumeSnapshot    // a restore's snapshot
}

func (s *source) volumeContentSource() *csi.VolumeContentSource {
	if s == nil {
		return nil
	}
	return s.content
}

// contentSource reads and checks a claim's data source. A kind that is
// neither a claim nor a VolumeSnapshot is left to a volume populator: an
// IgnoredError, which the library neither retries nor reports.
func (p *Provisioner) contentSource(ctx context.Context, claim *v1.PersistentVolumeClaim, cleanUp bool) (*source, error) {
	ds, err := request.DataSourceOf(claim)
	if err != nil {
		return nil, err
	}
	switch ds.Kind {
	case request.NoSource:
		return nil, nil
	case request.CloneSource:
		content, src, err := p.cloneSource(ctx, claim, ds.Name, cleanUp)
		if err != nil {
			return nil, err
		}
		return &source{content: content, claim: src}, nil
	case request.SnapshotSource:
		return p.snapshotSource(ctx, claim, ds.Name, cleanUp)
	}
	return nil, &controller.IgnoredError{Reason: fmt.Sprintf("the data source %s %q (group %q) is left to a volume populator", ds.TypeKind, ds.Name, ds.Group)}
}

// snapshotSource reads a restore's snapshot and content (from the API
// server: a cache may not show a fresh ready state or deletion) and checks
// them.
func (p *Provisioner) snapshotSource(ctx context.Context, claim *v1.PersistentVolumeClaim, name string, cleanUp bool) (*source, error) {
	if !p.o.Snapshots {
		return nil, fmt.Errorf("the driver %s cannot restore snapshots (no CREATE_DELETE_SNAPSHOT capability)", p.o.Driver.DriverName())
	}
	if p.o.SnapshotClient == nil {
		return nil, errors.New("the VolumeSnapshot API (snapshot.storage.k8s.io/v1) is not installed in this cluster; restart the provisioner once it is")
	}
	snap, err := p.o.SnapshotClient.SnapshotV1().VolumeSnapshots(claim.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", name, err)
	}
	var content *snapv1.VolumeSnapshotContent
	if snap.Status != nil && ptr.Deref(snap.Status.BoundVolumeSnapshotContentName, "") != "" {
		content, err = p.o.SnapshotClient.SnapshotV1().VolumeSnapshotContents().Get(ctx, *snap.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("snapshot %s: its VolumeSnapshotContent: %w", name, err)
		}
	}
	cs, err := request.CheckSnapshotSource(request.SnapshotInput{Claim: claim, Snapshot: snap, Content: content, Driver: p.o.Driver.DriverName(),
		PreventVolumeModeConversion: p.o.PreventVolumeModeConversion, Started: restoreStarted(claim, snap), CleanUp: cleanUp})
	if err != nil {
		return nil, err
	}
	return &source{content: cs, snapshot: snap}, nil
}

// restoreStarted reports whether a claim's restore from snap started
// already: the claim holds the in-flight record and the snapshot still
// carries protect.FinalizerSnapshotSource.
func restoreStarted(claim *v1.PersistentVolumeClaim, snap *snapv1.VolumeSnapshot) bool {
	return inflight.Holds(claim) && slices.Contains(snap.Finalizers, protect.FinalizerSnapshotSource)
}

// protect puts the source's finalizer on it before CreateVolume, through
// package protect, the one writer of the source-protection finalizers.
func (p *Provisioner) protect(ctx context.Context, src *source) error {
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
