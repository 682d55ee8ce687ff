package benchcap

import (
	"context"
	"maps"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// driver is a CSI controller with GET_CAPACITY and nothing behind it, run
// in the bench's process on a unix socket: it answers GetCapacity per
// (segment, pool), from a table the bench can change, and counts the calls.
// A segment is the value of topologyKey; a pool is the class parameter
// "pool". It makes no volume (no claim is created).
type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer

	mu    sync.Mutex
	calls int64
	bySeg map[string]int64 // calls by segment
	free  map[spot]int64   // what the bench changed; else baseFree
	// asked, when set for a spot, is called (under mu) each time that
	// spot is answered, with the answer and when it was given.
	asked map[spot]func(free int64, at time.Time)
}

// spot is one (segment, pool): one CSIStorageCapacity object per class.
type spot struct{ segment, pool string }

// baseFree is every spot's capacity until the bench changes it.
const baseFree = 100 << 30

func newDriver() *driver {
	return &driver{bySeg: map[string]int64{}, free: map[spot]int64{}, asked: map[spot]func(int64, time.Time){}}
}

// serve runs the driver on a socket in a new folder until the test ends,
// and returns the socket's path.
func (d *driver) serve(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cap") // socket paths must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "csi.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return socket
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: driverName, VendorVersion: "bench"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	var caps []*csi.PluginCapability
	for _, s := range []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE,
		csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS} {
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: s}}})
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, c := range []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (d *driver) GetCapacity(_ context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	s := spot{segment: req.GetAccessibleTopology().GetSegments()[topologyKey], pool: req.GetParameters()["pool"]}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	d.bySeg[s.segment]++
	free, ok := d.free[s]
	if !ok {
		free = baseFree
	}
	if f := d.asked[s]; f != nil {
		f(free, time.Now())
	}
	return &csi.GetCapacityResponse{AvailableCapacity: free, MaximumVolumeSize: wrapperspb.Int64(free)}, nil
}

// Calls is how many GetCapacity calls the driver answered so far.
func (d *driver) Calls() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// bySegment is a copy of the calls by segment so far.
func (d *driver) bySegment() map[string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.bySeg)
}

// change sets a spot's capacity to free the moment the provisioner has
// been told the old one (the worst moment: the change waits a whole poll
// to be asked for), and returns when that was, then when the provisioner
// was first told the new one. Both arrive on the returned channels.
func (d *driver) change(s spot, free int64) (changed, told <-chan time.Time) {
	ch, tl := make(chan time.Time, 1), make(chan time.Time, 1)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked[s] = func(answered int64, at time.Time) {
		if answered != free {
			d.free[s] = free
			ch <- time.Now()
			return
		}
		delete(d.asked, s)
		tl <- at
	}
	return ch, tl
}
