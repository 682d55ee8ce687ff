package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/klog/v2"
)

// Snapshots. A snapshot is a copy of a volume's folder, kept under
// <root>/snapshots the way volumes are kept under <root>/volumes:
//
//	<id>.json   the snapshot's metadata: it exists exactly when this does
//	<id>/       the copy of the source volume's files
//	.<id>.*     a metadata file being written
//
// CreateSnapshot copies the files first and writes <id>.json last, so a
// crash leaves either a finished snapshot or a folder without metadata,
// which the start removes (as does a retried CreateSnapshot). Deletion
// removes the metadata first, then the folder. Files are copied with a
// reflink (FICLONE) where the file system has them (btrfs, XFS), else
// byte by byte. Snapshots do not count against the node's capacity.
//
// A volume restored from a snapshot records the snapshot's ID and, until
// its files are all copied, that it is filling: a CreateVolume retried
// after a crash copies them again; one whose snapshot is gone meanwhile
// deletes the half-filled volume and answers NotFound.
//
// A snapshot's ID names the node that holds it: <local>@<node>, where
// <local> is its name under <root>/snapshots. The scheduler knows nothing of
// where a snapshot is, so it may pick another node for a restored claim:
// there a restore answers ResourceExhausted, on which a provisioner with a
// selected node (external-provisioner's rule, and tether's) has the claim
// scheduled again. An ID without "@" names a snapshot of this node.

const snapDir = "snapshots"

// snapNodeSep joins a snapshot's local name and its node in its ID; node
// names (DNS subdomains) and local names never hold it.
const snapNodeSep = "@"

// maxSnapshotID keeps IDs within the CSI spec's 128 bytes.
const maxSnapshotID = 128

// snapMeta is the content of a snapshot's <id>.json.
type snapMeta struct {
	Name           string `json:"name"`
	SourceVolumeID string `json:"sourceVolumeId"`
	SizeBytes      int64  `json:"sizeBytes"`
	CreatedUnix    int64  `json:"createdUnixNano"`
}

type snapStore struct {
	dir   string
	mu    sync.Mutex
	snaps map[string]snapMeta
}

// openSnapStore loads the snapshots under root and removes what an
// interrupted create or delete left.
func openSnapStore(root string) (*snapStore, error) {
	s := &snapStore{dir: filepath.Join(root, snapDir), snaps: map[string]snapMeta{}}
	if err := os.MkdirAll(s.dir, 0o750); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var folders []string
	for _, e := range entries {
		n := e.Name()
		switch {
		case strings.HasPrefix(n, "."):
			if err := os.Remove(filepath.Join(s.dir, n)); err != nil {
				return nil, err
			}
		case e.IsDir():
			folders = append(folders, n)
		case strings.HasSuffix(n, metaSuffix) && validID(strings.TrimSuffix(n, metaSuffix)):
			var m snapMeta
			b, err := os.ReadFile(filepath.Join(s.dir, n))
			if err == nil {
				err = json.Unmarshal(b, &m)
			}
			if err != nil || m.Name == "" || m.SourceVolumeID == "" {
				return nil, fmt.Errorf("snapshot %s: bad metadata (%v)", n, err)
			}
			s.snaps[strings.TrimSuffix(n, metaSuffix)] = m
		}
	}
	for _, id := range folders {
		if _, ok := s.snaps[id]; !ok {
			klog.InfoS("Removing the folder of an unfinished snapshot", "snapshotID", id)
			if err := os.RemoveAll(filepath.Join(s.dir, id)); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

func (s *snapStore) path(id string) string { return filepath.Join(s.dir, id) }

func (s *snapStore) get(id string) (snapMeta, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.snaps[id]
	return m, ok
}

// snapLocalIDFor derives the local name of the snapshot CreateSnapshot
// calls name: as a volume's ID, hashed when the ID with the node would be
// too long.
func (d *Driver) snapLocalIDFor(name string) string {
	id := volumeIDFor(name)
	if len(id)+len(snapNodeSep)+len(d.cfg.NodeID) > maxSnapshotID {
		id = volumeIDFor("/" + name) // never a valid ID, so always the hash
	}
	return id
}

// snapshotID is the ID of this node's snapshot named local.
func (d *Driver) snapshotID(local string) string { return local + snapNodeSep + d.cfg.NodeID }

// splitSnapshotID returns the local name of a snapshot ID and, when another
// node holds the snapshot, that node.
func (d *Driver) splitSnapshotID(id string) (local, elsewhere string) {
	i := strings.LastIndex(id, snapNodeSep)
	if i < 0 {
		return id, ""
	}
	if node := id[i+len(snapNodeSep):]; node != d.cfg.NodeID {
		return id[:i], node
	}
	return id[:i], ""
}

// snapLockKey is a snapshot's key in the driver's key locks; a slash is
// never in a volume ID, so the keys do not collide.
func snapLockKey(id string) string { return "snapshot/" + id }

func (d *Driver) snapshot(id string, m snapMeta) *csi.Snapshot {
	return &csi.Snapshot{SnapshotId: d.snapshotID(id), SourceVolumeId: m.SourceVolumeID, SizeBytes: m.SizeBytes,
		CreationTime: timestamppb.New(time.Unix(0, m.CreatedUnix)), ReadyToUse: true}
}

// createSnapshot copies a volume's folder. The caller holds the source
// volume's lock and the snapshot's.
func (d *Driver) createSnapshot(req *csi.CreateSnapshotRequest, id string) (*csi.CreateSnapshotResponse, error) {
	name, source := req.GetName(), req.GetSourceVolumeId()
	if m, ok := d.snaps.get(id); ok {
		if m.Name != name || m.SourceVolumeID != source {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %q exists with another source volume (%s)", m.Name, m.SourceVolumeID)
		}
		return &csi.CreateSnapshotResponse{Snapshot: d.snapshot(id, m)}, nil
	}
	vol, ok := d.store.get(source)
	if !ok || !validID(source) {
		return nil, status.Errorf(codes.NotFound, "source volume %s does not exist", source)
	}
	dst := d.snaps.path(id)
	if err := os.RemoveAll(dst); err != nil {
		return nil, status.Errorf(codes.Internal, "removing a leftover snapshot folder: %v", err)
	}
	if err := copyTree(d.store.path(source), dst); err != nil {
		_ = os.RemoveAll(dst)
		return nil, status.Errorf(codes.Internal, "copying volume %s: %v", source, err)
	}
	m := snapMeta{Name: name, SourceVolumeID: source, SizeBytes: vol.CapacityBytes, CreatedUnix: time.Now().UnixNano()}
	b, _ := json.Marshal(m)
	if err := writeFileAtomic(d.snaps.dir, id, b); err != nil {
		_ = os.RemoveAll(dst)
		return nil, status.Errorf(codes.Internal, "writing the metadata of snapshot %s: %v", id, err)
	}
	d.snaps.mu.Lock()
	d.snaps.snaps[id] = m
	d.snaps.mu.Unlock()
	klog.InfoS("Created snapshot", "name", name, "snapshotID", id, "sourceVolumeID", source)
	return &csi.CreateSnapshotResponse{Snapshot: d.snapshot(id, m)}, nil
}

// deleteSnapshot removes a snapshot; one that does not exist is deleted.
// The caller holds the snapshot's lock.
func (d *Driver) deleteSnapshot(id string) error {
	if !validID(id) {
		return nil
	}
	if err := os.Remove(filepath.Join(d.snaps.dir, id+metaSuffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return status.Errorf(codes.Internal, "removing the metadata of snapshot %s: %v", id, err)
	}
	d.snaps.mu.Lock()
	delete(d.snaps.snaps, id)
	d.snaps.mu.Unlock()
	if err := os.RemoveAll(d.snaps.path(id)); err != nil {
		return status.Errorf(codes.Internal, "removing the folder of snapshot %s: %v", id, err)
	}
	klog.V(2).InfoS("Deleted snapshot", "snapshotID", id)
	return nil
}

func (d *Driver) listSnapshots(req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, status.Error(codes.InvalidArgument, "negative max_entries")
	}
	after, token := "", req.GetStartingToken()
	if token != "" {
		var ok bool
		if after, ok = strings.CutPrefix(token, listTokenPrefix); !ok || !validID(after) {
			return nil, status.Errorf(codes.Aborted, "starting token %q was not made by this driver", token)
		}
	}
	want, elsewhere := d.splitSnapshotID(req.GetSnapshotId())
	if elsewhere != "" {
		return &csi.ListSnapshotsResponse{}, nil // not this node's
	}
	d.snaps.mu.Lock()
	ids := make([]string, 0, len(d.snaps.snaps))
	metas := make(map[string]snapMeta, len(d.snaps.snaps))
	for id, m := range d.snaps.snaps {
		if (want == "" || id == want) && (req.GetSourceVolumeId() == "" || m.SourceVolumeID == req.GetSourceVolumeId()) {
			ids = append(ids, id)
			metas[id] = m
		}
	}
	d.snaps.mu.Unlock()
	sort.Strings(ids)
	resp := &csi.ListSnapshotsResponse{}
	last := ""
	for _, id := range ids {
		if id <= after {
			continue
		}
		if n := int(req.GetMaxEntries()); n > 0 && len(resp.Entries) == n {
			resp.NextToken = listTokenPrefix + last
			break
		}
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: d.snapshot(id, metas[id])})
		last = id
	}
	return resp, nil
}

// restoreSource checks a CreateVolume's content source: a snapshot of this
// driver, returned with its ID; none is "". A volume source (a clone) is
// refused: the driver has no CLONE_VOLUME.
func (d *Driver) restoreSource(req *csi.CreateVolumeRequest) (string, snapMeta, error) {
	src := req.GetVolumeContentSource()
	if src == nil {
		return "", snapMeta{}, nil
	}
	if src.GetSnapshot() == nil {
		return "", snapMeta{}, status.Error(codes.InvalidArgument, "only snapshots can be a volume's content source (no CLONE_VOLUME)")
	}
	id, elsewhere := d.splitSnapshotID(src.GetSnapshot().GetSnapshotId())
	if elsewhere != "" {
		return "", snapMeta{}, status.Errorf(codes.ResourceExhausted, "snapshot %s is on node %s: a restore from it can only be made there, not on node %s",
			src.GetSnapshot().GetSnapshotId(), elsewhere, d.cfg.NodeID)
	}
	m, ok := d.snaps.get(id)
	if !ok || !validID(id) {
		// A restore from it cut short before the snapshot went can never
		// finish: its half-made volume goes (the caller holds its lock).
		vid := volumeIDFor(req.GetName())
		if v, ok := d.store.get(vid); ok && v.Filling && v.SourceSnapshot == id {
			if err := d.store.remove(vid); err != nil {
				return "", snapMeta{}, err
			}
			klog.InfoS("Removed a volume whose restore cannot finish: its snapshot is gone", "volumeID", vid, "snapshotID", id)
		}
		return "", snapMeta{}, status.Errorf(codes.NotFound, "snapshot %q does not exist", src.GetSnapshot().GetSnapshotId())
	}
	return id, m, nil
}

// restoreSize is the size of a volume restored from a snapshot of snapSize
// bytes: the request's size, which may not be smaller than the snapshot;
// without a required size, the snapshot's size when the default is smaller.
func restoreSize(size, snapSize int64, r *csi.CapacityRange) (int64, error) {
	if size >= snapSize {
		return size, nil
	}
	if r.GetRequiredBytes() > 0 || (r.GetLimitBytes() > 0 && r.GetLimitBytes() < snapSize) {
		return 0, status.Errorf(codes.OutOfRange, "the snapshot holds %d bytes, more than the %d requested", snapSize, size)
	}
	return snapSize, nil
}

// fill copies a snapshot's files into a new volume's folder, then records
// the volume as filled. The caller holds the volume's lock; the snapshot's
// is taken here (volume before snapshot, as CreateSnapshot takes them).
// A snapshot deleted before the copy makes the half-made volume go.
func (d *Driver) fill(ctx context.Context, id string, m volumeMeta) (volumeMeta, error) {
	unlock, err := d.lockVolume(ctx, snapLockKey(m.SourceSnapshot))
	if err != nil {
		return m, err
	}
	defer unlock()
	if _, ok := d.snaps.get(m.SourceSnapshot); !ok {
		if err := d.store.remove(id); err != nil {
			return m, err
		}
		return m, status.Errorf(codes.NotFound, "snapshot %q was deleted before volume %s was restored from it; the volume is removed", m.SourceSnapshot, id)
	}
	dst := d.store.path(id)
	if err := emptyFolder(dst); err != nil {
		return m, status.Errorf(codes.Internal, "emptying volume %s: %v", id, err)
	}
	if err := copyTree(d.snaps.path(m.SourceSnapshot), dst); err != nil {
		return m, status.Errorf(codes.Internal, "restoring snapshot %s into volume %s: %v", m.SourceSnapshot, id, err)
	}
	m.Filling = false
	if err := d.store.writeMeta(id, m); err != nil {
		return m, status.Errorf(codes.Internal, "writing metadata of %s: %v", id, err)
	}
	d.store.mu.Lock()
	d.store.vols[id] = m
	d.store.mu.Unlock()
	klog.InfoS("Restored volume from snapshot", "volumeID", id, "snapshotID", m.SourceSnapshot)
	return m, nil
}

// restoredVolume is the volume, with its content source when restored.
func (d *Driver) restoredVolume(id string, m volumeMeta) *csi.Volume {
	v := d.volume(id, m)
	if m.SourceSnapshot != "" {
		v.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: d.snapshotID(m.SourceSnapshot)}}}
	}
	return v
}

// emptyFolder removes everything inside dir, keeping dir.
func emptyFolder(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// writeFileAtomic writes dir/<id>.json through a temp file and a rename,
// durably.
func writeFileAtomic(dir, id string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+id+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, id+metaSuffix))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// The gRPC methods.

func (s *controllerServer) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	switch {
	case req.GetName() == "":
		return nil, status.Error(codes.InvalidArgument, "no snapshot name")
	case req.GetSourceVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "no source volume ID")
	}
	unlockVol, err := s.d.lockVolume(ctx, req.GetSourceVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlockVol()
	id := s.d.snapLocalIDFor(req.GetName())
	unlock, err := s.d.lockVolume(ctx, snapLockKey(id))
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.d.createSnapshot(req, id)
}

func (s *controllerServer) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if req.GetSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "no snapshot ID")
	}
	id, elsewhere := s.d.splitSnapshotID(req.GetSnapshotId())
	if elsewhere != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "snapshot %s is on node %s, not on node %s: only the driver there can delete it",
			req.GetSnapshotId(), elsewhere, s.d.cfg.NodeID)
	}
	unlock, err := s.d.lockVolume(ctx, snapLockKey(id))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := s.d.deleteSnapshot(id); err != nil {
		return nil, err
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

func (s *controllerServer) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	return s.d.listSnapshots(req)
}
