package provisioner

import (
	"fmt"
	"slices"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestProtectDecision(t *testing.T) {
	checked, _ := sourcePair()
	with := func(change func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
		c := checked.DeepCopy()
		change(c)
		return c
	}
	now := metav1.Now()
	tests := []struct {
		name    string
		current *v1.PersistentVolumeClaim
		want    bool
		wantErr string
	}{
		{name: "unprotected: add", current: checked, want: true},
		{name: "changed since (another clone's write, a label): add", current: with(func(c *v1.PersistentVolumeClaim) {
			c.ResourceVersion, c.Labels = "99", map[string]string{"a": "b"}
		}), want: true},
		{name: "protected by another clone meanwhile: nothing to write", current: with(func(c *v1.PersistentVolumeClaim) {
			c.Finalizers = []string{FinalizerCloneSource}
		})},
		{name: "protected and being deleted: nothing to write", current: with(func(c *v1.PersistentVolumeClaim) {
			c.Finalizers, c.DeletionTimestamp = []string{FinalizerCloneSource}, &now
		})},
		{name: "replaced by another claim of the name", current: with(func(c *v1.PersistentVolumeClaim) { c.UID = "other" }),
			wantErr: "clone source claim src was replaced"},
		{name: "being deleted", current: with(func(c *v1.PersistentVolumeClaim) { c.DeletionTimestamp = &now }),
			wantErr: "clone source claim src is being deleted"},
		{name: "bound to another volume", current: with(func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-other" }),
			wantErr: "bound to another volume"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := protectDecision(checked, tt.current)
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// Five clones of one source at once: each read the source before any of
// them protected it. Every one succeeds (no conflict reaches the library,
// which would make a Warning ProvisioningFailed and retry later), with one
// write of the finalizer; a source replaced meanwhile is refused.
func TestClonesProtectOneSourceAtOnce(t *testing.T) {
	e := newEnv(t, cloning())
	src, _ := sourcePair()
	read := e.createClaim(src)
	for i := range 5 {
		clone := newClaim(cloneOf("src"), func(c *v1.PersistentVolumeClaim) {
			c.Name, c.UID = fmt.Sprintf("clone-%d", i), types.UID(fmt.Sprintf("clone-uid-%d", i))
		})
		if err := e.p.protectSource(e.ctx, clone, read); err != nil {
			t.Fatalf("clone %d: %v", i, err)
		}
	}
	got, err := e.client.CoreV1().PersistentVolumeClaims(testNS).Get(e.ctx, "src", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(slices.Clone(got.Finalizers), func(f string) bool { return f != FinalizerCloneSource })); n != 1 {
		t.Errorf("source finalizers %v, want the cloning protection once", got.Finalizers)
	}
	updates := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "persistentvolumeclaims" {
			updates++
		}
	}
	if updates != 5 { // the first clone's; the others' conflict, then a fresh read finds the finalizer
		t.Errorf("%d claim updates, want 5", updates)
	}

	// The source deleted and made again under its name since the read
	// (the clone protection lets the first go).
	e.deleteClaim("src")
	e.updateClaim("src", func(c *v1.PersistentVolumeClaim) { c.Finalizers = nil })
	again, _ := sourcePair()
	again.UID = "src-uid-2"
	e.createClaim(again)
	checkErr(t, e.p.protectSource(e.ctx, newClaim(cloneOf("src")), read), "clone source claim src was replaced")
}

func TestProtectSnapshotDecision(t *testing.T) {
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
			got, err := protectSnapshotDecision(checked, tt.current)
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
