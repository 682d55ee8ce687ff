package driver

import (
	"context"
	"os"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The gRPC services. The volume methods are thin: they take the lock of the
// volume the request names and call the unlocked implementation in
// controller.go or node.go, so that no two calls work on one volume at once
// (concurrent creates of one name return one volume) while calls on other
// volumes go on. Calls that name no single volume (ListVolumes, GetCapacity)
// take no volume lock; they read the inventory under its own mutex.

type identityServer struct {
	csi.UnimplementedIdentityServer
	d *Driver
}

func (s *identityServer) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: s.d.cfg.Name, VendorVersion: s.d.cfg.VendorVersion}, nil
}

func (s *identityServer) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	service := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		service(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
	}}, nil
}

// Probe is ready while the volume folder can be read.
func (s *identityServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if _, err := os.Stat(s.d.store.dir); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "volume folder: %v", err)
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

type controllerServer struct {
	csi.UnimplementedControllerServer
	d *Driver
}

func (s *controllerServer) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume name")
	}
	unlock, err := s.d.lockVolume(ctx, volumeIDFor(req.GetName()))
	if err != nil {
		return nil, err
	}
	defer unlock()
	resp, err := s.d.createVolume(ctx, req)
	if err == nil && s.d.cfg.SlowCreate > 0 {
		// A slow backend, for chaos tests: the volume exists, the answer is late.
		select {
		case <-time.After(s.d.cfg.SlowCreate):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return resp, err
}

func (s *controllerServer) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume ID")
	}
	unlock, err := s.d.lockVolume(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.d.deleteVolume(req)
}

func (s *controllerServer) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume ID")
	}
	unlock, err := s.d.lockVolume(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.d.validateVolumeCapabilities(req)
}

func (s *controllerServer) ListVolumes(_ context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	return s.d.listVolumes(req)
}

func (s *controllerServer) GetCapacity(_ context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	return s.d.getCapacity(req)
}

// ControllerGetCapabilities lists what controllerServer implements, and
// nothing else.
func (s *controllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT, // snapshots.go
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

type nodeServer struct {
	csi.UnimplementedNodeServer
	d *Driver
}

func (s *nodeServer) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume ID")
	}
	unlock, err := s.d.lockVolume(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.d.nodePublishVolume(req)
}

func (s *nodeServer) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume ID")
	}
	unlock, err := s.d.lockVolume(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.d.nodeUnpublishVolume(req)
}

func (s *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             s.d.cfg.NodeID,
		AccessibleTopology: s.d.topology(),
		MaxVolumesPerNode:  0, // no limit but capacity
	}, nil
}

// NodeGetCapabilities lists none: a folder needs no staging, and the
// driver reports no stats, expansion or conditions.
func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}
