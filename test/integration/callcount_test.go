package integration

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// countingProxy stands in front of a driver's socket and forwards the
// identity and controller calls a provisioner makes (tether's or
// external-provisioner's), counting DeleteVolume calls by volume ID.
type countingProxy struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	Socket string
	id     csi.IdentityClient
	ctrl   csi.ControllerClient

	mu      sync.Mutex
	deletes map[string]int
}

func startCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	dir, err := os.MkdirTemp("", "csi") // socket paths must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &countingProxy{Socket: filepath.Join(dir, "count.sock"), id: csi.NewIdentityClient(conn), ctrl: csi.NewControllerClient(conn),
		deletes: map[string]int{}}
	lis, err := net.Listen("unix", p.Socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, p)
	csi.RegisterControllerServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return p
}

func (p *countingProxy) GetPluginInfo(ctx context.Context, r *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return p.id.GetPluginInfo(ctx, r)
}

func (p *countingProxy) GetPluginCapabilities(ctx context.Context, r *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return p.id.GetPluginCapabilities(ctx, r)
}

func (p *countingProxy) Probe(ctx context.Context, r *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return p.id.Probe(ctx, r)
}

func (p *countingProxy) ControllerGetCapabilities(ctx context.Context, r *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return p.ctrl.ControllerGetCapabilities(ctx, r)
}

func (p *countingProxy) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return p.ctrl.CreateVolume(ctx, r)
}

func (p *countingProxy) DeleteVolume(ctx context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	p.mu.Lock()
	p.deletes[r.GetVolumeId()]++
	p.mu.Unlock()
	return p.ctrl.DeleteVolume(ctx, r)
}

func (p *countingProxy) ListVolumes(ctx context.Context, r *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	return p.ctrl.ListVolumes(ctx, r)
}

func (p *countingProxy) GetCapacity(ctx context.Context, r *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	return p.ctrl.GetCapacity(ctx, r)
}

// deleteCalls is how many DeleteVolume calls each volume ID got.
func (p *countingProxy) deleteCalls() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.deletes))
	for k, v := range p.deletes {
		out[k] = v
	}
	return out
}
