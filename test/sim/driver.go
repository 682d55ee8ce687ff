package sim

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	"github.com/tether-csi/tether/pkg/provisioner/sweep"
)

const (
	driverName = "sim.csi.tether.dev"
	prefix     = "pvc"
	thisOwner  = "cluster-a"
	otherOwner = "cluster-b"
)

// backendVolume is a volume on the simulated storage backend.
type backendVolume struct {
	ID, Name string
	// Node is the node a node-local volume lives on ("" for a shared one).
	Node string
	// Request is what it was made with (the driver compares it on a repeated
	// CreateVolume), Source the clone source or snapshot handle.
	Request, Source string
	Context         map[string]string
	// Other: made by another cluster sharing the backend.
	Other   bool
	Deleted bool
	// Gone: it went with its node (Deleted too).
	Gone bool
	// Upstream: external-provisioner made it (upstream.go).
	Upstream bool
	// Admin: the admin made it with the storage's own tools, for a static
	// PV (admin_volumes.go).
	Admin bool
}

// pendingCreate is a CreateVolume that timed out for its caller and goes
// on in the background.
type pendingCreate struct {
	key string
	vol *backendVolume
}

// backend is the storage behind the simulated CSI driver.
type backend struct {
	w       *World
	vols    map[string]*backendVolume // by ID
	byName  map[string]string         // node/name to ID
	pending []*pendingCreate
	ids     int
	// alreadyExists: names for which CreateVolume answered AlreadyExists.
	alreadyExists map[string]bool
}

func newBackend(w *World) *backend {
	return &backend{w: w, vols: map[string]*backendVolume{}, byName: map[string]string{}, alreadyExists: map[string]bool{}}
}

// driver is the CSI driver as one provisioner sees it (in node mode, the
// driver of one node). It implements provisioner.Driver and sweep.ListingDriver.
type driver struct {
	b    *backend
	node string
	// upstream: external-provisioner's calls (upstream.go): what they make
	// and delete is left out of tether's checks.
	upstream bool
}

var (
	_ provisioner.Driver  = (*driver)(nil)
	_ sweep.ListingDriver = (*driver)(nil)
)

func (d *driver) DriverName() string { return driverName }

func requestKey(req *csi.CreateVolumeRequest, strict bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cap=%d", req.GetCapacityRange().GetRequiredBytes())
	if strict {
		keys := sortedKeys(req.GetParameters())
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, req.GetParameters()[k])
		}
		mk := sortedKeys(req.GetMutableParameters())
		for _, k := range mk {
			fmt.Fprintf(&b, " m:%s=%s", k, req.GetMutableParameters()[k])
		}
	}
	return b.String()
}

func sourceOf(req *csi.CreateVolumeRequest) string {
	if v := req.GetVolumeContentSource().GetVolume().GetVolumeId(); v != "" {
		return "volume:" + v
	}
	if s := req.GetVolumeContentSource().GetSnapshot().GetSnapshotId(); s != "" {
		return "snapshot:" + s
	}
	return ""
}

// CreateVolume is idempotent by name: a volume of that name made with the
// same request is returned; with another request, AlreadyExists. While a
// timed-out call still works in the background, a repeat is Aborted. The
// scheduler's fault plan may make it time out (with or without the volume
// made later), or answer ResourceExhausted or Unavailable having made
// nothing. It supports no block volumes (refused.go).
func (d *driver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	resp, err := d.create(req)
	d.b.w.noteCreate(d, req.GetName(), err)
	return resp, err
}

func (d *driver) create(req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	w := d.b.w
	key := d.node + "/" + req.GetName()
	if !d.upstream {
		w.checkCreate(d, req)
	}
	if strings.HasPrefix(sourceOf(req), "volume:") {
		w.cloned[req.GetName()] = true
	}
	if strings.HasPrefix(sourceOf(req), "snapshot:") && !d.upstream {
		w.checkRestoreCreate(req)
	}
	w.checkNodeCreate(d, req.GetName())
	if w.machineGone(d) {
		w.tracef("  csi CreateVolume %s: Unavailable (node %s is deleted)", key, d.node)
		return nil, status.Error(codes.Unavailable, "the node is gone")
	}
	if err := refusesBlock(req); err != nil {
		w.tracef("  csi CreateVolume %s: InvalidArgument (a block volume)", key)
		return nil, err
	}
	for _, p := range d.b.pending {
		if p.key == key {
			if w.cfg.Node && w.faults && w.rng.Intn(2) == 0 && true {
				// The node is full: the volume being made counts.
				w.tracef("  csi CreateVolume %s: ResourceExhausted (the volume being made fills the node)", key)
				return nil, status.Error(codes.ResourceExhausted, "no space left on the node")
			}
			w.tracef("  csi CreateVolume %s: Aborted (in progress)", key)
			return nil, status.Error(codes.Aborted, "an operation for this volume is in progress")
		}
	}
	rk := requestKey(req, w.cfg.StrictParams)
	if id, ok := d.b.byName[key]; ok {
		v := d.b.vols[id]
		if v.Request != rk || v.Source != sourceOf(req) {
			w.tracef("  csi CreateVolume %s: AlreadyExists (asked %q, has %q)", key, rk, v.Request)
			d.b.alreadyExists[req.GetName()] = true
			return nil, status.Error(codes.AlreadyExists, "a volume of this name exists with other parameters")
		}
		w.tracef("  csi CreateVolume %s: exists, %s", key, id)
		return response(v, req), nil
	}
	if src := sourceOf(req); strings.HasPrefix(src, "volume:") {
		if sv := d.b.vols[strings.TrimPrefix(src, "volume:")]; sv == nil || sv.Deleted {
			return nil, status.Error(codes.NotFound, "the source volume does not exist")
		}
	}
	if !w.restoreFrom(sourceOf(req)) {
		w.tracef("  csi CreateVolume %s: NotFound (no snapshot %s)", key, sourceOf(req))
		return nil, status.Error(codes.NotFound, "the source snapshot does not exist")
	}
	vol := &backendVolume{Name: req.GetName(), Node: d.node, Request: rk, Source: sourceOf(req), Context: map[string]string{},
		Upstream: d.upstream}
	if o := req.GetParameters()[request.OwnerKey]; o != "" {
		vol.Context[request.OwnerKey] = o
	}
	switch w.driverFault() {
	case dfTimeoutMade:
		d.b.pending = append(d.b.pending, &pendingCreate{key: key, vol: vol})
		w.tracef("  csi CreateVolume %s: DeadlineExceeded (being made in the background)", key)
		return nil, status.Error(codes.DeadlineExceeded, "timed out")
	case dfTimeoutNothing:
		w.tracef("  csi CreateVolume %s: DeadlineExceeded (nothing made)", key)
		return nil, status.Error(codes.DeadlineExceeded, "timed out")
	case dfExhausted:
		w.tracef("  csi CreateVolume %s: ResourceExhausted", key)
		return nil, status.Error(codes.ResourceExhausted, "no space left")
	case dfUnavailable:
		w.tracef("  csi CreateVolume %s: Unavailable", key)
		return nil, status.Error(codes.Unavailable, "driver restarting")
	}
	d.b.make(key, vol)
	w.tracef("  csi CreateVolume %s: made %s", key, vol.ID)
	return response(vol, req), nil
}

func (b *backend) make(key string, vol *backendVolume) {
	b.ids++
	vol.ID = fmt.Sprintf("vol-%04d", b.ids)
	vol.Context["sim/name"] = vol.Name
	b.vols[vol.ID] = vol
	b.byName[key] = vol.ID
}

// finish completes a background CreateVolume.
func (b *backend) finish(i int) {
	p := b.pending[i]
	b.pending = append(b.pending[:i], b.pending[i+1:]...)
	b.make(p.key, p.vol)
	b.w.tracef("  csi background CreateVolume %s: made %s", p.key, p.vol.ID)
}

func response(v *backendVolume, req *csi.CreateVolumeRequest) *csi.CreateVolumeResponse {
	vol := &csi.Volume{VolumeId: v.ID, CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
		VolumeContext: maps.Clone(v.Context), ContentSource: req.GetVolumeContentSource()}
	if v.Node != "" {
		vol.AccessibleTopology = []*csi.Topology{{Segments: map[string]string{topologyKey: v.Node}}}
	}
	return &csi.CreateVolumeResponse{Volume: vol}
}

// DeleteVolume deletes a volume (a missing one is fine, as CSI says); the
// invariants about which volumes may be deleted are checked first.
func (d *driver) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	w := d.b.w
	if w.hashFault(req.GetVolumeId(), 4) {
		w.tracef("  csi DeleteVolume %s: Unavailable", req.GetVolumeId())
		return nil, status.Error(codes.Unavailable, "driver restarting")
	}
	if w.machineGone(d) {
		w.tracef("  csi DeleteVolume %s: Unavailable (node %s is deleted)", req.GetVolumeId(), d.node)
		return nil, status.Error(codes.Unavailable, "the node is gone")
	}
	v := d.b.vols[req.GetVolumeId()]
	if v == nil || v.Deleted {
		w.tracef("  csi DeleteVolume %s: not found (ok)", req.GetVolumeId())
		return &csi.DeleteVolumeResponse{}, nil
	}
	w.checkNodeDelete(d, v)
	if d.node != "" && v.Node != d.node {
		return nil, status.Error(codes.NotFound, "not on this node")
	}
	if !d.upstream {
		w.checkDelete(v)
		w.checkAttached(d, v)
	}
	v.Deleted = true
	delete(d.b.byName, v.Node+"/"+v.Name)
	w.tracef("  csi DeleteVolume %s (%s)", v.ID, v.Name)
	return &csi.DeleteVolumeResponse{}, nil
}

// ListVolumes lists the volumes (of this node in node mode), with their
// contexts (the owner mark).
func (d *driver) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	if d.b.w.machineGone(d) {
		return nil, status.Error(codes.Unavailable, "the node is gone")
	}
	resp := &csi.ListVolumesResponse{}
	ids := sortedKeys(d.b.vols)
	sort.Strings(ids)
	for _, id := range ids {
		v := d.b.vols[id]
		if v.Deleted || (d.node != "" && v.Node != d.node) {
			continue
		}
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{
			VolumeId: v.ID, VolumeContext: maps.Clone(v.Context)}})
	}
	return resp, nil
}

const topologyKey = "topology.sim.tether.dev/node"
