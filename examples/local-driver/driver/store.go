package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// The inventory lives on disk only; the map in store mirrors it and is
// rebuilt from it at start. Under <root>/volumes:
//
//	<id>.json   the volume's metadata (name, capacity): the volume exists
//	            exactly when this file does, and its capacity is allocated
//	<id>/       the volume's data, the folder that is bind-mounted
//	.<id>.*     a metadata file being written (temp, then renamed)
//
// Creation writes <id>.json (atomically: temp file, fsync, rename, fsync of
// the folder) and then makes <id>/. Deletion removes <id>.json and then
// <id>/. So the metadata file is the commit point both ways, and a crash
// at any step leaves one of:
//
//   - a temp file: a create that never committed; removed at start.
//   - <id>.json without <id>/: a create that committed but did not finish;
//     the volume exists and is counted, and the start (or the CO's retry of
//     CreateVolume, or a publish) makes the folder.
//   - <id>/ without <id>.json: a delete that committed but did not finish;
//     the volume no longer exists and is not counted, and the start (or the
//     CO's retry of DeleteVolume, or a new create of the same ID) removes
//     the folder, so a new volume never sees an old volume's files.
//
// Capacity is never counted twice (it is the sum over metadata files, one
// per ID) and a volume that exists is never unlisted (listing reads the same
// files).

const metaSuffix = ".json"

// volumeMeta is the content of <id>.json.
type volumeMeta struct {
	Name          string `json:"name"`
	CapacityBytes int64  `json:"capacityBytes"`
	// Context is the volume context, returned by CreateVolume and
	// ListVolumes: the parameters the driver echoes (see echoed).
	Context map[string]string `json:"context,omitempty"`
	// SourceSnapshot is the snapshot the volume is restored from, and
	// Filling says its files are not all copied yet (see snapshots.go).
	SourceSnapshot string `json:"sourceSnapshot,omitempty"`
	Filling        bool   `json:"filling,omitempty"`
}

// idPattern is what a volume ID looks like: a name that is a safe file name
// is its own ID; any other name maps to "x-" and a hash (see volumeIDFor).
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// volumeIDFor derives the stable volume ID of a CreateVolume name.
func volumeIDFor(name string) string {
	if idPattern.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "x-" + hex.EncodeToString(sum[:16])
}

// validID reports whether id can name a volume of this driver; an ID that
// cannot is never looked up on disk (no path escapes the root).
func validID(id string) bool { return idPattern.MatchString(id) }

type store struct {
	dir   string // <root>/volumes
	total int64  // the node's capacity in bytes

	// mu makes each allocate/free step atomic: the free-space check and
	// the metadata write happen together, so concurrent creates of
	// different volumes cannot overcommit the node.
	mu   sync.Mutex
	vols map[string]volumeMeta
	used int64
}

// openStore loads the inventory under root and finishes or undoes what a
// crash interrupted (see the comment at the top).
func openStore(root string, total int64) (*store, error) {
	s := &store{dir: filepath.Join(root, "volumes"), total: total, vols: map[string]volumeMeta{}}
	if err := os.MkdirAll(s.dir, 0o750); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	folders := map[string]bool{}
	for _, e := range entries {
		n := e.Name()
		switch {
		case strings.HasPrefix(n, "."):
			klog.InfoS("Removing an unfinished metadata write", "file", n)
			if err := os.Remove(filepath.Join(s.dir, n)); err != nil {
				return nil, err
			}
		case e.IsDir():
			folders[n] = true
		case e.Type().IsRegular() && strings.HasSuffix(n, metaSuffix) && validID(strings.TrimSuffix(n, metaSuffix)):
			id := strings.TrimSuffix(n, metaSuffix)
			m, err := readMeta(filepath.Join(s.dir, n))
			if err != nil {
				// Files are written atomically, so this is damage from
				// outside; guessing could lose or double-count a volume.
				return nil, fmt.Errorf("volume %s: %w", id, err)
			}
			s.vols[id] = m
			s.used += m.CapacityBytes
		default:
			klog.InfoS("Ignoring an unknown file in the volume folder", "file", n)
		}
	}
	for id := range folders {
		if _, ok := s.vols[id]; !ok {
			klog.InfoS("Removing the folder of a volume whose deletion was interrupted", "volumeID", id)
			if err := os.RemoveAll(s.path(id)); err != nil {
				return nil, err
			}
		}
	}
	for id := range s.vols {
		if !folders[id] {
			klog.InfoS("Making the folder of a volume whose creation was interrupted", "volumeID", id)
			if err := s.mkFolder(id); err != nil {
				return nil, err
			}
		}
	}
	if s.used > s.total {
		klog.InfoS("Volumes use more than the node's capacity; new volumes will not fit", "used", s.used, "capacity", s.total)
	}
	return s, nil
}

func readMeta(path string) (volumeMeta, error) {
	var m volumeMeta
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("bad metadata %s: %w", path, err)
	}
	if m.Name == "" || m.CapacityBytes < 0 {
		return m, fmt.Errorf("bad metadata %s: no name or negative capacity", path)
	}
	return m, nil
}

// path is the data folder of volume id.
func (s *store) path(id string) string { return filepath.Join(s.dir, id) }

func (s *store) metaPath(id string) string { return filepath.Join(s.dir, id+metaSuffix) }

func (s *store) get(id string) (volumeMeta, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.vols[id]
	return m, ok
}

// free is the capacity not allocated to any volume (never negative).
func (s *store) free() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.total-s.used, 0)
}

type listed struct {
	id string
	volumeMeta
}

// list returns every volume, ordered by ID.
func (s *store) list() []listed {
	s.mu.Lock()
	out := make([]listed, 0, len(s.vols))
	for id, m := range s.vols {
		out = append(out, listed{id, m})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// create allocates m.CapacityBytes to a new volume id and makes its folder.
// The caller holds id's key lock and has checked that id does not exist.
func (s *store) create(id string, m volumeMeta) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if free := s.total - s.used; m.CapacityBytes > free {
		return status.Errorf(codes.ResourceExhausted, "volume %s needs %d bytes but the node has %d of %d free", id, m.CapacityBytes, max(free, 0), s.total)
	}
	// A folder without metadata is what an interrupted delete leaves.
	if err := os.RemoveAll(s.path(id)); err != nil {
		return status.Errorf(codes.Internal, "removing leftover folder of %s: %v", id, err)
	}
	if err := s.writeMeta(id, m); err != nil {
		return status.Errorf(codes.Internal, "writing metadata of %s: %v", id, err)
	}
	s.vols[id] = m
	s.used += m.CapacityBytes
	if err := s.mkFolder(id); err != nil {
		// Roll back so that a failed create does not hold capacity.
		if rerr := s.removeMeta(id); rerr == nil {
			delete(s.vols, id)
			s.used -= m.CapacityBytes
		}
		return status.Errorf(codes.Internal, "making folder of %s: %v", id, err)
	}
	return nil
}

// mkFolder makes the folder of volume id unless it exists. A new folder is
// mode 0777, whatever the umask, so that a pod running as any user can write.
func (s *store) mkFolder(id string) error {
	err := os.Mkdir(s.path(id), 0o777)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return os.Chmod(s.path(id), 0o777)
}

// ensureFolder makes the folder of an existing volume if a crash lost it.
func (s *store) ensureFolder(id string) error {
	if err := s.mkFolder(id); err != nil {
		return status.Errorf(codes.Internal, "making folder of %s: %v", id, err)
	}
	return nil
}

// remove deletes volume id: metadata first (the volume stops existing and
// its capacity is free), then the folder. If the folder removal fails, a
// retry finds no metadata and removes the folder only.
func (s *store) remove(id string) error {
	s.mu.Lock()
	if m, ok := s.vols[id]; ok {
		if err := s.removeMeta(id); err != nil {
			s.mu.Unlock()
			return status.Errorf(codes.Internal, "removing metadata of %s: %v", id, err)
		}
		delete(s.vols, id)
		s.used -= m.CapacityBytes
	}
	s.mu.Unlock()
	if err := os.RemoveAll(s.path(id)); err != nil {
		return status.Errorf(codes.Internal, "removing folder of %s: %v", id, err)
	}
	return nil
}

// writeMeta writes <id>.json atomically and durably.
func (s *store) writeMeta(id string, m volumeMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.dir, "."+id+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.metaPath(id))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return s.syncDir()
}

func (s *store) removeMeta(id string) error {
	if err := os.Remove(s.metaPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return s.syncDir()
}

// syncDir makes a rename or removal in the volume folder durable.
func (s *store) syncDir() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
