package driver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func (td *testDriver) snapshot(name, source string) (*csi.Snapshot, error) {
	resp, err := td.ctrl.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: source})
	return resp.GetSnapshot(), err
}

func (td *testDriver) restore(name string, required int64, snapID string) (*csi.Volume, error) {
	req := createReq(name, required, 0)
	req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snapID}}}
	resp, err := td.ctrl.CreateVolume(context.Background(), req)
	return resp.GetVolume(), err
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o640); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A snapshot keeps the files as they were; a volume restored from it gets
// them, whatever the source volume became since.
func TestSnapshotAndRestore(t *testing.T) {
	td := newTestDriver(t, 10*gi)
	vol := td.mustCreate("src", gi)
	dir := td.d.store.path(vol.VolumeId)
	writeFile(t, filepath.Join(dir, "a.txt"), "first")
	writeFile(t, filepath.Join(dir, "sub", "b.txt"), "nested")
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	snap, err := td.snapshot("snap-1", vol.VolumeId)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.ReadyToUse || snap.SizeBytes != gi || snap.SourceVolumeId != vol.VolumeId || snap.CreationTime == nil {
		t.Errorf("snapshot %+v", snap)
	}
	writeFile(t, filepath.Join(dir, "a.txt"), "changed after the snapshot")

	restored, err := td.restore("restored", 2*gi, snap.SnapshotId)
	if err != nil {
		t.Fatal(err)
	}
	if restored.GetContentSource().GetSnapshot().GetSnapshotId() != snap.SnapshotId || restored.CapacityBytes != 2*gi {
		t.Errorf("restored volume %+v", restored)
	}
	rdir := td.d.store.path(restored.VolumeId)
	if got := readFile(t, filepath.Join(rdir, "a.txt")); got != "first" {
		t.Errorf("a.txt = %q, want the snapshot's", got)
	}
	if got := readFile(t, filepath.Join(rdir, "sub", "b.txt")); got != "nested" {
		t.Errorf("sub/b.txt = %q", got)
	}
	if l, err := os.Readlink(filepath.Join(rdir, "link")); err != nil || l != "a.txt" {
		t.Errorf("link = %q, %v", l, err)
	}
	if fi, err := os.Stat(filepath.Join(rdir, "sub", "b.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("sub/b.txt mode %v, %v", fi.Mode(), err)
	}

	// A retried CreateVolume returns the same volume; another source or
	// none is another volume's request.
	if again, err := td.restore("restored", 2*gi, snap.SnapshotId); err != nil || again.VolumeId != restored.VolumeId {
		t.Errorf("retry: %v %v", again, err)
	}
	_, err = td.create("restored", 2*gi)
	wantCode(t, err, codes.AlreadyExists)

	// The snapshot outlives its source volume and is deleted by itself.
	td.mustDelete(vol.VolumeId)
	if _, err := td.ctrl.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: snap.SnapshotId}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(td.d.snaps.path(localSnap(t, snap.SnapshotId))); !os.IsNotExist(err) {
		t.Errorf("the snapshot's folder is still there: %v", err)
	}
	if _, err := td.ctrl.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: snap.SnapshotId}); err != nil {
		t.Errorf("deleting a deleted snapshot: %v", err)
	}
	_, err = td.restore("late", gi, snap.SnapshotId)
	wantCode(t, err, codes.NotFound)
}

func TestSnapshotErrors(t *testing.T) {
	td := newTestDriver(t, 10*gi)
	vol := td.mustCreate("src", 2*gi)
	other := td.mustCreate("other", gi)
	_, err := td.snapshot("", vol.VolumeId)
	wantCode(t, err, codes.InvalidArgument)
	_, err = td.snapshot("s", "")
	wantCode(t, err, codes.InvalidArgument)
	_, err = td.snapshot("s", "no-such-volume")
	wantCode(t, err, codes.NotFound)
	snap, err := td.snapshot("s", vol.VolumeId)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := td.snapshot("s", vol.VolumeId); err != nil || again.SnapshotId != snap.SnapshotId {
		t.Errorf("same name and source again: %v %v", again, err)
	}
	_, err = td.snapshot("s", other.VolumeId)
	wantCode(t, err, codes.AlreadyExists)
	_, err = td.restore("small", gi, snap.SnapshotId)
	wantCode(t, err, codes.OutOfRange)
	if v, err := td.restore("default-size", 0, snap.SnapshotId); err != nil || v.CapacityBytes != 2*gi {
		t.Errorf("restore without a size: %v %v, want the snapshot's 2Gi", v, err)
	}
	req := createReq("clone", gi, 0)
	req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: vol.VolumeId}}}
	_, err = td.ctrl.CreateVolume(context.Background(), req)
	wantCode(t, err, codes.InvalidArgument)
	_, err = td.ctrl.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{})
	wantCode(t, err, codes.InvalidArgument)
}

func TestListSnapshots(t *testing.T) {
	td := newTestDriver(t, 10*gi)
	a, b := td.mustCreate("a", gi), td.mustCreate("b", gi)
	for _, s := range []struct{ name, src string }{{"s1", a.VolumeId}, {"s2", a.VolumeId}, {"s3", b.VolumeId}} {
		if _, err := td.snapshot(s.name, s.src); err != nil {
			t.Fatal(err)
		}
	}
	list := func(req *csi.ListSnapshotsRequest) []string {
		t.Helper()
		var ids []string
		for {
			resp, err := td.ctrl.ListSnapshots(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range resp.Entries {
				ids = append(ids, e.Snapshot.SnapshotId)
			}
			if resp.NextToken == "" {
				return ids
			}
			req.StartingToken = resp.NextToken
		}
	}
	if got := list(&csi.ListSnapshotsRequest{MaxEntries: 2}); len(got) != 3 {
		t.Errorf("paged list %v", got)
	}
	if got := list(&csi.ListSnapshotsRequest{SourceVolumeId: a.VolumeId}); len(got) != 2 {
		t.Errorf("by source %v", got)
	}
	if got := list(&csi.ListSnapshotsRequest{SnapshotId: "s3@node-a"}); len(got) != 1 || got[0] != "s3@node-a" {
		t.Errorf("by ID %v", got)
	}
	if got := list(&csi.ListSnapshotsRequest{SnapshotId: "nope"}); len(got) != 0 {
		t.Errorf("unknown ID %v", got)
	}
	_, err := td.ctrl.ListSnapshots(context.Background(), &csi.ListSnapshotsRequest{StartingToken: "bogus"})
	wantCode(t, err, codes.Aborted)
}

// A restart keeps finished snapshots and removes an unfinished one; a
// volume whose restore was cut short is filled on the retried create, or
// removed when its snapshot is gone.
func TestSnapshotsAcrossRestart(t *testing.T) {
	root := t.TempDir()
	td := openTestDriver(t, root, 10*gi)
	vol := td.mustCreate("src", gi)
	writeFile(t, filepath.Join(td.d.store.path(vol.VolumeId), "f"), "data")
	snap, err := td.snapshot("s", vol.VolumeId)
	if err != nil {
		t.Fatal(err)
	}
	// An interrupted snapshot: a folder without metadata.
	if err := os.Mkdir(filepath.Join(root, snapDir, "half"), 0o700); err != nil {
		t.Fatal(err)
	}
	// An interrupted restore: committed, files not copied yet.
	half := volumeMeta{Name: "half-restored", CapacityBytes: gi, SourceSnapshot: localSnap(t, snap.SnapshotId), Filling: true}
	if err := td.d.store.create("half-restored", half); err != nil {
		t.Fatal(err)
	}
	gone := volumeMeta{Name: "orphan-restore", CapacityBytes: gi, SourceSnapshot: "deleted-snap", Filling: true}
	if err := td.d.store.create("orphan-restore", gone); err != nil {
		t.Fatal(err)
	}

	td = openTestDriver(t, root, 10*gi)
	if _, err := os.Stat(filepath.Join(root, snapDir, "half")); !os.IsNotExist(err) {
		t.Errorf("the unfinished snapshot's folder stayed: %v", err)
	}
	if _, ok := td.d.snaps.get(localSnap(t, snap.SnapshotId)); !ok {
		t.Fatal("the snapshot was lost in the restart")
	}
	v, err := td.restore("half-restored", gi, snap.SnapshotId)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(td.d.store.path(v.VolumeId), "f")); got != "data" {
		t.Errorf("the retried restore holds %q", got)
	}
	var m volumeMeta
	if err := json.Unmarshal([]byte(readFile(t, td.d.store.metaPath(v.VolumeId))), &m); err != nil || m.Filling {
		t.Errorf("metadata after the fill: %+v %v", m, err)
	}
	req := createReq("orphan-restore", gi, 0)
	req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "deleted-snap"}}}
	_, err = td.ctrl.CreateVolume(context.Background(), req)
	wantCode(t, err, codes.NotFound)
	if _, ok := td.d.store.get("orphan-restore"); ok {
		t.Error("the half-made volume of a deleted snapshot stayed")
	}
}

// localSnap is the local name of one of node-a's snapshot IDs.
func localSnap(t *testing.T, id string) string {
	t.Helper()
	local, ok := strings.CutSuffix(id, snapNodeSep+"node-a")
	if !ok {
		t.Fatalf("snapshot ID %q does not name node-a", id)
	}
	return local
}

// TestSnapshotOnAnotherNode: an ID names the node holding the snapshot; a
// restore elsewhere answers ResourceExhausted (the claim is scheduled
// again), a deletion elsewhere fails, a listing elsewhere finds nothing,
// and an ID without a node names this node's snapshot.
func TestSnapshotOnAnotherNode(t *testing.T) {
	td := openTestDriver(t, t.TempDir(), 10*gi)
	vol, err := td.create("src", gi)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(td.d.store.path(vol.VolumeId), "f"), "data")
	snap, err := td.snapshot("snap", vol.VolumeId)
	if err != nil {
		t.Fatal(err)
	}
	if snap.SnapshotId != "snap@node-a" {
		t.Fatalf("snapshot ID %q, want snap@node-a", snap.SnapshotId)
	}
	long, err := td.snapshot(strings.Repeat("n", 127), vol.VolumeId)
	if err != nil {
		t.Fatal(err)
	}
	if len(long.SnapshotId) > maxSnapshotID || !strings.HasSuffix(long.SnapshotId, "@node-a") {
		t.Errorf("a long name's snapshot ID %q (%d bytes)", long.SnapshotId, len(long.SnapshotId))
	}

	for _, tc := range []struct {
		name, id string
		restore  codes.Code // OK: restored
		delete   codes.Code
		listed   int
	}{
		{"this node's", "snap@node-a", codes.OK, codes.OK, 1},
		{"without a node: this node's", "snap", codes.OK, codes.OK, 1},
		{"another node's", "snap@node-b", codes.ResourceExhausted, codes.FailedPrecondition, 0},
		{"unknown, this node", "nope@node-a", codes.NotFound, codes.OK, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := td.restore("r-"+strings.ReplaceAll(tc.name, " ", "-"), gi, tc.id)
			wantCode(t, err, tc.restore)
			if err == nil {
				if got := readFile(t, filepath.Join(td.d.store.path(v.VolumeId), "f")); got != "data" {
					t.Errorf("restored %q", got)
				}
				if src := v.GetContentSource().GetSnapshot().GetSnapshotId(); src != "snap@node-a" {
					t.Errorf("content source %q, want snap@node-a", src)
				}
			}
			resp, err := td.ctrl.ListSnapshots(context.Background(), &csi.ListSnapshotsRequest{SnapshotId: tc.id})
			if err != nil || len(resp.Entries) != tc.listed {
				t.Errorf("listed %d (%v), want %d", len(resp.GetEntries()), err, tc.listed)
			}
			if tc.delete != codes.OK {
				_, err := td.ctrl.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: tc.id})
				wantCode(t, err, tc.delete)
			}
		})
	}
	if _, ok := td.d.snaps.get("snap"); !ok {
		t.Error("a deletion on another node's ID removed this node's snapshot")
	}
}
