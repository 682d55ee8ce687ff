package provisioner

import (
	"errors"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

const (
	testSnap    = "snap"
	testContent = "snapcontent-1"
	testHandle  = "snap-handle-1"
)

// readySnapshot is apps/snap, ready, of 1Gi, bound to a content of
// driverNm taken of a Filesystem volume.
func readySnapshot() (*snapv1.VolumeSnapshot, *snapv1.VolumeSnapshotContent) {
	size := resource.MustParse("1Gi")
	fs := v1.PersistentVolumeFilesystem
	snap := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testSnap, UID: "snap-uid"},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To("orig")}},
		Status: &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: ptr.To(testContent),
			ReadyToUse: ptr.To(true), RestoreSize: &size},
	}
	content := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: testContent},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: v1.ObjectReference{Namespace: testNS, Name: testSnap, UID: "snap-uid"},
			Driver:            driverNm, DeletionPolicy: snapv1.VolumeSnapshotContentDelete, SourceVolumeMode: &fs,
		},
		Status: &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: ptr.To(testHandle), ReadyToUse: ptr.To(true)},
	}
	return snap, content
}

func restoreOf(name string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: name}
		c.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: name}
	}
}

// restoring is a claim whose restore started: it holds the record (an
// earlier version's record also held a snapshot handle, no longer trusted).
func restoring(handle string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) {
		inflight.Record(c, driverNm, testVolume)
		if handle != "" {
			c.Annotations[inflight.AnnSnapshot] = handle
		}
	}
}

func TestPopulatorSourceIgnored(t *testing.T) {
	p := &Provisioner{o: Options{Driver: cloneDriver{}}}
	claim := newClaim(func(c *v1.PersistentVolumeClaim) {
		c.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: ptr.To("hello.example.com"), Kind: "Hello", Name: "x"}
	})
	_, err := p.contentSource(t.Context(), claim, false)
	var ignored *controller.IgnoredError
	if !errors.As(err, &ignored) {
		t.Fatalf("a populator's data source: %v, want an IgnoredError", err)
	}
}

func TestCheckSnapshotSource(t *testing.T) {
	block := v1.PersistentVolumeBlock
	tests := []struct {
		name       string
		claim      *v1.PersistentVolumeClaim
		change     func(*snapv1.VolumeSnapshot, *snapv1.VolumeSnapshotContent)
		noContent  bool
		allowModes bool // --prevent-volume-mode-conversion=false
		wantErr    string
	}{
		{name: "ready, bound, same driver and size", claim: newClaim(restoreOf(testSnap))},
		{name: "a larger request", claim: newClaim(restoreOf(testSnap), requested("2Gi"))},
		{name: "no restore size given", claim: newClaim(restoreOf(testSnap), requested("1Mi")),
			change: func(s *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) { s.Status.RestoreSize = nil }},
		{name: "restore size larger than the request", claim: newClaim(restoreOf(testSnap), requested("512Mi")),
			wantErr: "less than the restore size 1Gi"},
		{name: "not bound", claim: newClaim(restoreOf(testSnap)), wantErr: "not bound",
			change: func(s *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) { s.Status = nil }},
		{name: "its content is missing", claim: newClaim(restoreOf(testSnap)), noContent: true, wantErr: "does not exist"},
		{name: "its content is another snapshot's", claim: newClaim(restoreOf(testSnap)), wantErr: "bound to another snapshot",
			change: func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) {
				c.Spec.VolumeSnapshotRef.UID = "earlier"
			}},
		{name: "another driver's", claim: newClaim(restoreOf(testSnap)), wantErr: "belongs to the driver other.csi",
			change: func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) { c.Spec.Driver = "other.csi" }},
		{name: "not ready", claim: newClaim(restoreOf(testSnap)), wantErr: "not ready",
			change: func(s *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) { s.Status.ReadyToUse = ptr.To(false) }},
		{name: "no handle yet", claim: newClaim(restoreOf(testSnap)), wantErr: "no snapshot handle",
			change: func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) { c.Status = nil }},
		{name: "Block from a Filesystem snapshot: refused", claim: newClaim(restoreOf(testSnap), volumeMode(block)),
			wantErr: request.AnnAllowVolumeModeChange + "=true"},
		{name: "Block from a Filesystem snapshot, the content allows it", claim: newClaim(restoreOf(testSnap), volumeMode(block)),
			change: func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) {
				c.Annotations = map[string]string{request.AnnAllowVolumeModeChange: "true"}
			}},
		{name: "Block from a Filesystem snapshot, the content says false", claim: newClaim(restoreOf(testSnap), volumeMode(block)),
			wantErr: "needs the annotation",
			change: func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) {
				c.Annotations = map[string]string{request.AnnAllowVolumeModeChange: "false"}
			}},
		{name: "Block from a Filesystem snapshot, --prevent-volume-mode-conversion=false", claim: newClaim(restoreOf(testSnap), volumeMode(block)),
			allowModes: true},
		{name: "a content of an old snapshotter without source mode: taken", claim: newClaim(restoreOf(testSnap), volumeMode(block)),
			change: func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) { c.Spec.SourceVolumeMode = nil }},
		{name: "being deleted: no new restore", claim: newClaim(restoreOf(testSnap)), wantErr: "is being deleted",
			change: func(s *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
				s.DeletionTimestamp, s.Finalizers = &metav1.Time{}, []string{protect.FinalizerSnapshotSource}
			}},
		{name: "being deleted, the claim's restore started: it goes on", claim: newClaim(restoreOf(testSnap), restoring(testHandle)),
			change: func(s *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
				s.DeletionTimestamp, s.Finalizers = &metav1.Time{}, []string{protect.FinalizerSnapshotSource}
			}},
		{name: "being deleted and no longer protected: refused even for a started restore", claim: newClaim(restoreOf(testSnap), restoring(testHandle)),
			wantErr: "is being deleted",
			change: func(s *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
				s.DeletionTimestamp, s.Finalizers = &metav1.Time{}, []string{"snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"}
			}},
		{name: "being deleted, the claim's record names another snapshot handle: the content's handle is taken, not the claim's", claim: newClaim(restoreOf(testSnap), restoring("forged")),
			change: func(s *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
				s.DeletionTimestamp, s.Finalizers = &metav1.Time{}, []string{protect.FinalizerSnapshotSource}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, content := readySnapshot()
			if tt.change != nil {
				tt.change(snap, content)
			}
			if tt.noContent {
				content = nil
			}
			cs, err := request.CheckSnapshotSource(request.SnapshotInput{Claim: tt.claim, Snapshot: snap, Content: content, Driver: driverNm,
				PreventVolumeModeConversion: !tt.allowModes, Started: restoreStarted(tt.claim, snap)})
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if got := cs.GetSnapshot().GetSnapshotId(); got != testHandle {
				t.Errorf("content source snapshot %q, want %s", got, testHandle)
			}
		})
	}
}
