package csi

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/klog/v2"
)

// fakeDriver is a minimal in-process CSI driver for the tests.
type fakeDriver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer

	name        string
	pluginCaps  []csi.PluginCapability_Service_Type
	ctrlCaps    []csi.ControllerServiceCapability_RPC_Type
	notReady    atomic.Int32 // answers ready=false this many more times
	neverReady  bool
	noProbe     bool // Probe answers Unimplemented
	omitReady   bool // Probe answers without the ready field
	probes      atomic.Int32
	ctrlCapsGot atomic.Int32
	// createVolume, if set, handles CreateVolume.
	createVolume func(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error)
}

func (f *fakeDriver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: f.name, VendorVersion: "test"}, nil
}

func (f *fakeDriver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	resp := &csi.GetPluginCapabilitiesResponse{}
	for _, t := range f.pluginCaps {
		resp.Capabilities = append(resp.Capabilities, &csi.PluginCapability{
			Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}},
		})
	}
	return resp, nil
}

func (f *fakeDriver) Probe(ctx context.Context, req *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if f.noProbe {
		return f.UnimplementedIdentityServer.Probe(ctx, req)
	}
	f.probes.Add(1)
	if f.omitReady {
		return &csi.ProbeResponse{}, nil
	}
	ready := !f.neverReady && f.notReady.Add(-1) < 0
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(ready)}, nil
}

func (f *fakeDriver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	f.ctrlCapsGot.Add(1)
	resp := &csi.ControllerGetCapabilitiesResponse{}
	for _, t := range f.ctrlCaps {
		resp.Capabilities = append(resp.Capabilities, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return resp, nil
}

func (f *fakeDriver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if f.createVolume != nil {
		return f.createVolume(ctx, req)
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-" + req.GetName(), CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}}, nil
}

func (f *fakeDriver) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}

func (f *fakeDriver) ListVolumes(context.Context, *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	return &csi.ListVolumesResponse{Entries: []*csi.ListVolumesResponse_Entry{{Volume: &csi.Volume{VolumeId: "v1"}}}}, nil
}

func (f *fakeDriver) GetCapacity(context.Context, *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	return &csi.GetCapacityResponse{AvailableCapacity: 42}, nil
}

// provisioningDriver offers what a provisioner needs.
func provisioningDriver() *fakeDriver {
	return &fakeDriver{
		name:       "fake.csi.tether.io",
		pluginCaps: []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE},
		ctrlCaps:   []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME},
	}
}

// testSocket returns a fresh socket path short enough for a unix socket
// (t.TempDir paths can pass the 108-byte limit with long test names).
func testSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "csi.sock")
}

// serve runs drv on a unix socket at path until the test ends.
func serve(t *testing.T, path string, drv *fakeDriver) {
	t.Helper()
	serveStoppable(t, path, drv)
}

// serveStoppable runs drv on a unix socket at path until the returned
// function is called (as if the driver exited; the socket goes) or the test
// ends.
func serveStoppable(t *testing.T, path string, drv *fakeDriver) (stop func()) {
	t.Helper()
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, drv)
	csi.RegisterControllerServer(srv, drv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.Stop()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

// startDriver serves drv on a new socket and returns the socket's path.
func startDriver(t *testing.T, drv *fakeDriver) string {
	t.Helper()
	path := testSocket(t)
	serve(t, path, drv)
	return path
}

// connect connects to the socket with a short timeout, failing the test on error.
func connect(t *testing.T, ctx context.Context, o Options) *Conn {
	t.Helper()
	c, err := Connect(ctx, o)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// logSink collects log lines so tests can wait for one or search them.
type logSink struct {
	mu    sync.Mutex
	lines []string
	seen  chan string // every line, if not full
}

func newLogger(verbosity int) (logr.Logger, *logSink) {
	s := &logSink{seen: make(chan string, 1000)}
	l := funcr.New(func(prefix, args string) {
		line := prefix + " " + args
		s.mu.Lock()
		s.lines = append(s.lines, line)
		s.mu.Unlock()
		select {
		case s.seen <- line:
		default:
		}
	}, funcr.Options{Verbosity: verbosity})
	return l, s
}

func (s *logSink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

func withLogger(ctx context.Context, l logr.Logger) context.Context {
	return klog.NewContext(ctx, l)
}
