package request

import (
	"fmt"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
)

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
	// Started: the claim's restore started already: it holds the in-flight
	// record and the snapshot still carries its source protection
	// finalizer. A snapshot being deleted is then taken.
	Started bool
	// CleanUp: the request repeats a deleted claim's CreateVolume, to find
	// its volume; a snapshot being deleted is taken.
	CleanUp bool
}

// CheckSnapshotSource checks a restore and returns its content source. A
// snapshot being deleted is taken only by a claim whose restore started
// already (in.Started), or by a clean-up: a repeated CreateVolume must
// find the same volume. The snapshot's handle comes from its bound
// content, never from the claim. It is pure.
func CheckSnapshotSource(in SnapshotInput) (*csi.VolumeContentSource, error) {
	snap, content, claim := in.Snapshot, in.Content, in.Claim
	name := snap.Name
	if snap.DeletionTimestamp != nil && !in.Started && !in.CleanUp {
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

// CheckCloneVolumeMode refuses a clone whose volume mode differs from its
// source volume's, as external-provisioner does: a Block volume cannot
// become a Filesystem one, nor the reverse. nil means Filesystem. The
// source's mode is its PV's, which is what the backend volume holds (a
// bound claim's mode always equals its PV's).
func CheckCloneVolumeMode(clone, source *v1.PersistentVolumeMode) error {
	want, have := volumeModeOf(clone), volumeModeOf(source)
	if want != have {
		return fmt.Errorf("a clone must have its source's volume mode: the source is %s, the clone requests %s", have, want)
	}
	return nil
}

func volumeModeOf(m *v1.PersistentVolumeMode) v1.PersistentVolumeMode {
	if m == nil || *m == "" {
		return v1.PersistentVolumeFilesystem
	}
	return *m
}
