package provisioner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/inflight"
)

// Restores from a VolumeSnapshot, as external-provisioner v6.3.0 does them:
// the snapshot must be ready, bound to a VolumeSnapshotContent of this
// driver that points back at it, with a restore size no larger than the
// request; a change of volume mode needs the content's
// AnnAllowVolumeModeChange while --prevent-volume-mode-conversion is on.
// Provision puts FinalizerSnapshotSource on the snapshot before
// CreateVolume and SnapshotProtection takes it off once no restore from it
// is in progress, so that the clean-up of a deleted claim finds it again.

// FinalizerSnapshotSource keeps a VolumeSnapshot while a volume is restored
// from it; external-provisioner uses the same name.
const FinalizerSnapshotSource = "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection"

// AnnAllowVolumeModeChange on a VolumeSnapshotContent, "true", lets a
// volume of another mode than the snapshot's source be restored from it.
const AnnAllowVolumeModeChange = "snapshot.storage.kubernetes.io/allow-volume-mode-change"

// SourceKind is what a claim's data source is to the provisioner.
type SourceKind int

const (
	// NoSource: an empty volume.
	NoSource SourceKind = iota
	// CloneSource: a PersistentVolumeClaim of the same namespace.
	CloneSource
	// SnapshotSource: a snapshot.storage.k8s.io VolumeSnapshot.
	SnapshotSource
	// PopulatorSource: any other kind, left to a volume populator.
	PopulatorSource
)

// DataSource is a claim's data source, from spec.dataSource, else
// spec.dataSourceRef, as external-provisioner reads them.
type DataSource struct {
	Kind SourceKind
	// Name and Namespace of the source object; Group and TypeKind as the
	// claim names them.
	Name, Namespace, Group, TypeKind string
}

// DataSourceOf reads a claim's data source. A dataSourceRef into another
// namespace is an error: external-provisioner takes one only behind its
// alpha CrossNamespaceVolumeDataSource gate (off by default), with
// Gateway API ReferenceGrants, and tether does not. It is pure.
func DataSourceOf(claim *v1.PersistentVolumeClaim) (DataSource, error) {
	var ds DataSource
	switch {
	case claim.Spec.DataSource != nil:
		s := claim.Spec.DataSource
		ds = DataSource{Name: s.Name, Namespace: claim.Namespace, TypeKind: s.Kind, Group: deref(s.APIGroup)}
	case claim.Spec.DataSourceRef != nil:
		s := claim.Spec.DataSourceRef
		ds = DataSource{Name: s.Name, Namespace: claim.Namespace, TypeKind: s.Kind, Group: deref(s.APIGroup)}
		if ns := deref(s.Namespace); ns != "" && ns != claim.Namespace {
			return ds, fmt.Errorf("the data source %s %s/%s is in another namespace: cross-namespace data sources are not supported", s.Kind, ns, s.Name)
		}
	default:
		return DataSource{}, nil
	}
	switch {
	case ds.TypeKind == "PersistentVolumeClaim" && ds.Group == "":
		ds.Kind = CloneSource
	case ds.TypeKind == "VolumeSnapshot" && ds.Group == snapv1.GroupName:
		ds.Kind = SnapshotSource
	default:
		ds.Kind = PopulatorSource
	}
	if ds.Name == "" && ds.Kind != PopulatorSource {
		return ds, fmt.Errorf("the data source %s has no name", ds.TypeKind)
	}
	return ds, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// SnapshotInput is what a restore is checked on, read from the API.
type SnapshotInput struct {
	Claim    *v1.PersistentVolumeClaim
	Snapshot *snapv1.VolumeSnapshot
	// Content is the VolumeSnapshotContent the snapshot's status names,
	// nil when it names none or it does not exist.
	Content *snapv1.VolumeSnapshotContent
	// Driver is this provisioner's driver.
	Driver string
	// PreventVolumeModeConversion is --prevent-volume-mode-conversion.
	PreventVolumeModeConversion bool
	// CleanUp: the request repeats a deleted claim's CreateVolume, to find
	// its volume; a snapshot being deleted is taken.
	CleanUp bool
}

// CheckSnapshotSource checks a restore and returns its content source. A
// snapshot being deleted is taken only by a claim whose restore started
// already (it holds the in-flight record and the snapshot still carries
// FinalizerSnapshotSource), or by a clean-up: a repeated CreateVolume must
// find the same volume. The snapshot's handle comes from its bound
// content, never from the claim. It is pure.
func CheckSnapshotSource(in SnapshotInput) (*csi.VolumeContentSource, error) {
	snap, content, claim := in.Snapshot, in.Content, in.Claim
	name := snap.Name
	started := inflight.Holds(claim) && slices.Contains(snap.Finalizers, FinalizerSnapshotSource)
	if snap.DeletionTimestamp != nil && !started && !in.CleanUp {
		return nil, fmt.Errorf("snapshot %s is being deleted", name)
	}
	if snap.Status == nil || deref(snap.Status.BoundVolumeSnapshotContentName) == "" {
		return nil, fmt.Errorf("snapshot %s is not bound to a VolumeSnapshotContent yet", name)
	}
	contentName := *snap.Status.BoundVolumeSnapshotContentName
	if content == nil {
		return nil, fmt.Errorf("snapshot %s: its VolumeSnapshotContent %s does not exist", name, contentName)
	}
	if ref := content.Spec.VolumeSnapshotRef; ref.UID != snap.UID || ref.Namespace != snap.Namespace || ref.Name != snap.Name {
		return nil, fmt.Errorf("snapshot %s: its VolumeSnapshotContent %s is bound to another snapshot (%s/%s)", name, contentName, ref.Namespace, ref.Name)
	}
	if content.Spec.Driver != in.Driver {
		return nil, fmt.Errorf("snapshot %s: its VolumeSnapshotContent %s belongs to the driver %s, not %s", name, contentName, content.Spec.Driver, in.Driver)
	}
	if snap.Status.ReadyToUse == nil || !*snap.Status.ReadyToUse {
		return nil, fmt.Errorf("snapshot %s is not ready to use yet", name)
	}
	if content.Status == nil || deref(content.Status.SnapshotHandle) == "" {
		return nil, fmt.Errorf("snapshot %s: its VolumeSnapshotContent %s has no snapshot handle yet", name, contentName)
	}
	handle := *content.Status.SnapshotHandle
	if size := snap.Status.RestoreSize; size != nil {
		want := claim.Spec.Resources.Requests[v1.ResourceStorage]
		if want.Cmp(*size) < 0 {
			return nil, fmt.Errorf("the claim requests %s, less than the restore size %s of snapshot %s", want.String(), size.String(), name)
		}
	}
	if in.PreventVolumeModeConversion && content.Spec.SourceVolumeMode != nil && claim.Spec.VolumeMode != nil &&
		*content.Spec.SourceVolumeMode != *claim.Spec.VolumeMode {
		allowed, err := strconv.ParseBool(content.Annotations[AnnAllowVolumeModeChange])
		if err != nil || !allowed {
			return nil, fmt.Errorf("snapshot %s is of a %s volume and the claim asks for %s: a change of volume mode needs the annotation %s=true on its VolumeSnapshotContent %s",
				name, *content.Spec.SourceVolumeMode, *claim.Spec.VolumeMode, AnnAllowVolumeModeChange, contentName)
		}
	}
	return snapshotContentSource(handle), nil
}

func snapshotContentSource(handle string) *csi.VolumeContentSource {
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: handle}}}
}

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
	ds, err := DataSourceOf(claim)
	if err != nil {
		return nil, err
	}
	switch ds.Kind {
	case NoSource:
		return nil, nil
	case CloneSource:
		content, src, err := p.cloneSource(ctx, claim, ds.Name, cleanUp)
		if err != nil {
			return nil, err
		}
		return &source{content: content, claim: src}, nil
	case SnapshotSource:
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
	if snap.Status != nil && deref(snap.Status.BoundVolumeSnapshotContentName) != "" {
		content, err = p.o.SnapshotClient.SnapshotV1().VolumeSnapshotContents().Get(ctx, *snap.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("snapshot %s: its VolumeSnapshotContent: %w", name, err)
		}
	}
	cs, err := CheckSnapshotSource(SnapshotInput{Claim: claim, Snapshot: snap, Content: content, Driver: p.o.Driver.DriverName(),
		PreventVolumeModeConversion: p.o.PreventVolumeModeConversion, CleanUp: cleanUp})
	if err != nil {
		return nil, err
	}
	return &source{content: cs, snapshot: snap}, nil
}

// protectSnapshot adds FinalizerSnapshotSource to a restore's snapshot.
// Restores from one snapshot made at once each add it: a write that
// conflicts is made again from a fresh read, as long as that read is still
// the snapshot that was checked (protectSnapshotDecision).
func (p *Provisioner) protectSnapshot(ctx context.Context, snap *snapv1.VolumeSnapshot) error {
	current := snap
	snaps := p.o.SnapshotClient.SnapshotV1().VolumeSnapshots(snap.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if current == nil {
			fresh, err := snaps.Get(ctx, snap.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			current = fresh
		}
		add, err := protectSnapshotDecision(snap, current)
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

// protectSnapshotDecision says, on a read of a restore's snapshot
// (current), whether its protection must be added: not when it holds it
// already (a restore retried while the snapshot is being deleted); an
// error when it is no longer the snapshot that was checked: another of the
// name, or, unprotected, one being deleted or bound to another content.
// Pure.
func protectSnapshotDecision(checked, current *snapv1.VolumeSnapshot) (bool, error) {
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

// protect puts the source's finalizer on it before CreateVolume.
func (p *Provisioner) protect(ctx context.Context, claim *v1.PersistentVolumeClaim, src *source) error {
	switch {
	case src == nil:
		return nil
	case src.claim != nil:
		return p.protectSource(ctx, claim, src.claim)
	case src.snapshot != nil:
		return p.protectSnapshot(ctx, src.snapshot)
	}
	return nil
}
