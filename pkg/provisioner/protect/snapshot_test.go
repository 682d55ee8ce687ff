package protect

import (
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSnapshotDecision(t *testing.T) {
	bound := func(content string) *snapv1.VolumeSnapshotStatus {
		return &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content}
	}
	checked := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "snap", UID: "snap-uid"}, Status: bound("content-1")}
	with := func(change func(*snapv1.VolumeSnapshot)) *snapv1.VolumeSnapshot {
		s := checked.DeepCopy()
		change(s)
		return s
	}
	now := metav1.Now()
	tests := []struct {
		name    string
		current *snapv1.VolumeSnapshot
		want    bool
		wantErr string
	}{
		{name: "unprotected: add", current: checked, want: true},
		{name: "changed since (another restore's write): add", current: with(func(s *snapv1.VolumeSnapshot) { s.ResourceVersion = "9" }), want: true},
		{name: "protected meanwhile: nothing to write", current: with(func(s *snapv1.VolumeSnapshot) { s.Finalizers = []string{FinalizerSnapshotSource} })},
		{name: "protected and being deleted (a retried restore): nothing to write", current: with(func(s *snapv1.VolumeSnapshot) {
			s.Finalizers, s.DeletionTimestamp = []string{FinalizerSnapshotSource}, &now
		})},
		{name: "replaced", current: with(func(s *snapv1.VolumeSnapshot) { s.UID = "other" }), wantErr: "snapshot snap was replaced"},
		{name: "unprotected and being deleted", current: with(func(s *snapv1.VolumeSnapshot) { s.DeletionTimestamp = &now }),
			wantErr: "snapshot snap is being deleted"},
		{name: "bound to another content", current: with(func(s *snapv1.VolumeSnapshot) { s.Status = bound("content-2") }),
			wantErr: "bound to another content"},
		{name: "no status any more", current: with(func(s *snapv1.VolumeSnapshot) { s.Status = nil }),
			wantErr: "bound to another content"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := snapshotDecision(checked, tt.current)
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
