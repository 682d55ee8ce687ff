package driver

import (
	"context"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/klog/v2"
)

// The controller's work. Each method that names a volume expects the caller
// to hold that volume's lock (see server.go).

// createVolume makes a volume, or returns the one that already has the
// request's name when its capacity satisfies the request.
func (d *Driver) createVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume name")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	snapID, snap, err := d.restoreSource(req)
	if err != nil {
		return nil, err
	}
	size, err := d.sizeFor(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	if snapID != "" {
		if size, err = restoreSize(size, snap.SizeBytes, req.GetCapacityRange()); err != nil {
			return nil, err
		}
	}
	if !d.placeable(req.GetAccessibilityRequirements()) {
		return nil, status.Errorf(codes.ResourceExhausted, "the requisite topology does not include node %s, the only place this driver can create volumes", d.cfg.NodeID)
	}

	id := volumeIDFor(name)
	if m, ok := d.store.get(id); ok {
		if m.Name != name {
			return nil, status.Errorf(codes.AlreadyExists, "volume ID %s already belongs to volume %q", id, m.Name)
		}
		if !fits(m.CapacityBytes, req.GetCapacityRange()) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with %d bytes, outside the requested range", name, m.CapacityBytes)
		}
		if m.SourceSnapshot != snapID {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with another content source", name)
		}
		// The same request again (a retry): finish it if it was cut short.
		if err := d.store.ensureFolder(id); err != nil {
			return nil, err
		}
		if m.Filling {
			if m, err = d.fill(ctx, id, m); err != nil {
				return nil, err
			}
		}
		return &csi.CreateVolumeResponse{Volume: d.restoredVolume(id, m)}, nil
	}
	m := volumeMeta{Name: name, CapacityBytes: size, Context: echoed(req.GetParameters()), SourceSnapshot: snapID, Filling: snapID != ""}
	if err := d.store.create(id, m); err != nil {
		return nil, err
	}
	klog.InfoS("Created volume", "name", name, "volumeID", id, "bytes", size)
	if m.Filling {
		if m, err = d.fill(ctx, id, m); err != nil {
			return nil, err
		}
	}
	return &csi.CreateVolumeResponse{Volume: d.restoredVolume(id, m)}, nil
}

// sizeFor picks the capacity of a new volume: the required size, or the
// default size (cut to the limit) when no size is required.
func (d *Driver) sizeFor(r *csi.CapacityRange) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	switch {
	case req < 0 || lim < 0:
		return 0, status.Error(codes.InvalidArgument, "negative capacity range")
	case lim > 0 && req > lim:
		return 0, status.Errorf(codes.InvalidArgument, "required bytes %d exceed limit bytes %d", req, lim)
	case req > 0:
		return req, nil
	case lim > 0:
		return min(d.cfg.DefaultVolumeSize, lim), nil
	}
	return d.cfg.DefaultVolumeSize, nil
}

// fits reports whether an existing volume of size bytes satisfies r.
func fits(size int64, r *csi.CapacityRange) bool {
	return size >= r.GetRequiredBytes() && (r.GetLimitBytes() == 0 || size <= r.GetLimitBytes())
}

// placeable reports whether a volume with the accessibility requirements
// t may be on this node: yes when t has no requisite topology, else when
// one of its requisite topologies is this node. Preferred topologies only
// order the requisite ones, so they do not matter with one node to offer.
func (d *Driver) placeable(t *csi.TopologyRequirement) bool {
	if len(t.GetRequisite()) == 0 {
		return true
	}
	for _, r := range t.GetRequisite() {
		if d.onThisNode(r) {
			return true
		}
	}
	return false
}

func (d *Driver) volume(id string, m volumeMeta) *csi.Volume {
	return &csi.Volume{
		VolumeId:           id,
		CapacityBytes:      m.CapacityBytes,
		VolumeContext:      m.Context,
		AccessibleTopology: []*csi.Topology{d.topology()},
	}
}

// OwnerParameter is tether's ownership mark: its orphan sweep deletes a
// volume only when ListVolumes returns this parameter's value in the
// volume context.
const OwnerParameter = "tether.dev/owner"

// echoed are the CreateVolume parameters kept as the volume's context.
func echoed(params map[string]string) map[string]string {
	v, ok := params[OwnerParameter]
	if !ok {
		return nil
	}
	return map[string]string{OwnerParameter: v}
}

// deleteVolume removes a volume; a volume that does not exist is already
// deleted. A volume still bind-mounted somewhere is refused, as the CO is
// to unpublish first and deleting would pull the files from under a pod.
func (d *Driver) deleteVolume(req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume ID")
	}
	if !validID(id) {
		return &csi.DeleteVolumeResponse{}, nil // not one of ours: nothing to delete
	}
	if _, ok := d.store.get(id); ok {
		mounts, err := mountsOf(d.store.path(id))
		if err != nil {
			return nil, status.Errorf(codes.Internal, "checking whether volume %s is mounted: %v", id, err)
		}
		if len(mounts) > 0 {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still mounted at %s", id, strings.Join(mounts, ", "))
		}
	}
	// Also when the metadata is gone: a folder may be left by a deletion
	// that failed half way.
	if err := d.store.remove(id); err != nil {
		return nil, err
	}
	klog.V(2).InfoS("Deleted volume", "volumeID", id)
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *Driver) validateVolumeCapabilities(req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume ID")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no volume capabilities")
	}
	if _, ok := d.store.get(id); !ok || !validID(id) {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
		MutableParameters:  req.GetMutableParameters(),
	}}, nil
}

// listTokenPrefix starts every ListVolumes token. A token is the last ID
// of the previous page, and the next page starts after it, so volumes
// created or deleted between pages neither repeat nor shift other entries.
const listTokenPrefix = "after:"

func (d *Driver) listVolumes(req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
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
	resp := &csi.ListVolumesResponse{}
	for _, v := range d.store.list() {
		if v.id <= after {
			continue
		}
		if n := int(req.GetMaxEntries()); n > 0 && len(resp.Entries) == n {
			resp.NextToken = listTokenPrefix + resp.Entries[n-1].GetVolume().GetVolumeId()
			break
		}
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{Volume: d.volume(v.id, v.volumeMeta)})
	}
	return resp, nil
}

// getCapacity reports the capacity not yet allocated, or zero when the
// request asks about another node or about volumes the driver cannot make.
func (d *Driver) getCapacity(req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	if t := req.GetAccessibleTopology(); t != nil && !d.onThisNode(t) {
		return &csi.GetCapacityResponse{AvailableCapacity: 0, MaximumVolumeSize: wrapperspb.Int64(0)}, nil
	}
	for _, c := range req.GetVolumeCapabilities() {
		if checkCapability(c) != nil {
			return &csi.GetCapacityResponse{AvailableCapacity: 0, MaximumVolumeSize: wrapperspb.Int64(0)}, nil
		}
	}
	free := d.store.free()
	return &csi.GetCapacityResponse{AvailableCapacity: free, MaximumVolumeSize: wrapperspb.Int64(free)}, nil
}
