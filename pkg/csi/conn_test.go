package csi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestConnectWaitsForSlowProbe(t *testing.T) {
	drv := provisioningDriver()
	drv.notReady.Store(3)
	path := startDriver(t, drv)
	logger, logs := newLogger(0)
	ctx, cancel := context.WithTimeout(withLogger(context.Background(), logger), 30*time.Second)
	defer cancel()

	c := connect(t, ctx, Options{Address: path, Timeout: time.Second})
	if got := drv.probes.Load(); got < 4 {
		t.Errorf("Probe was called %d times, want at least 4 (3 not ready, then ready)", got)
	}
	if c.DriverName() != drv.name {
		t.Errorf("DriverName() = %q, want %q", c.DriverName(), drv.name)
	}
	if !containsLine(logs.all(), "Waiting for the CSI driver", path) {
		t.Errorf("no %q log line naming the address; logs:\n%s", "Waiting for the CSI driver", strings.Join(logs.all(), "\n"))
	}
}

func TestConnectProbeWithoutReadyIsReady(t *testing.T) {
	drv := provisioningDriver()
	drv.omitReady = true
	path := startDriver(t, drv)
	connect(t, context.Background(), Options{Address: path, Timeout: time.Second})
}

func TestConnectNeverReady(t *testing.T) {
	drv := provisioningDriver()
	drv.neverReady = true
	path := startDriver(t, drv)
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()

	start := time.Now()
	c, err := Connect(ctx, Options{Address: path, Timeout: time.Second})
	if err == nil {
		_ = c.Close()
		t.Fatal("Connect succeeded with a driver that is never ready")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q does not wrap context.DeadlineExceeded", err)
	}
	for _, want := range []string{"gave up waiting", path, "ready=false"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Connect returned %v after the context ended", d)
	}
	if drv.probes.Load() < 2 {
		t.Errorf("Probe was called %d times, want retries", drv.probes.Load())
	}
}

func TestConnectSocketAppearsLate(t *testing.T) {
	path := testSocket(t)
	logger, logs := newLogger(0)
	ctx, cancel := context.WithTimeout(withLogger(context.Background(), logger), 30*time.Second)
	defer cancel()

	type result struct {
		c   *Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := Connect(ctx, Options{Address: "unix://" + path, Timeout: time.Second})
		done <- result{c, err}
	}()

	// Start the driver only once Connect has failed to reach the socket.
	waitForLine(t, ctx, logs, "Waiting for the CSI driver")
	serve(t, path, provisioningDriver())

	r := <-done
	if r.err != nil {
		t.Fatalf("Connect: %v", r.err)
	}
	defer r.c.Close()
	if r.c.DriverName() != "fake.csi.tether.io" {
		t.Errorf("DriverName() = %q", r.c.DriverName())
	}
}

func TestConnectNoSocket(t *testing.T) {
	path := testSocket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := Connect(ctx, Options{Address: path, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("Connect error = %v, want one naming the missing socket", err)
	}
	t.Log(err)
}

func TestConnectFailsFastWithoutProbe(t *testing.T) {
	drv := provisioningDriver()
	drv.noProbe = true
	path := startDriver(t, drv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Connect(ctx, Options{Address: path, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "Probe") || status.Code(errors.Unwrap(err)) != codes.Unimplemented {
		t.Fatalf("Connect error = %v, want an Unimplemented Probe error", err)
	}
	if ctx.Err() != nil {
		t.Error("Connect waited for the context instead of failing at once")
	}
}

func TestConnectRejectsEmptyDriverName(t *testing.T) {
	drv := provisioningDriver()
	drv.name = ""
	path := startDriver(t, drv)
	_, err := Connect(context.Background(), Options{Address: path, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "empty name") {
		t.Fatalf("Connect error = %v, want one about the empty name", err)
	}
}

func TestConnectRejectsEmptyAddress(t *testing.T) {
	for _, addr := range []string{"", "unix://", "unix:"} {
		if _, err := Connect(context.Background(), Options{Address: addr}); err == nil {
			t.Errorf("Connect(%q) succeeded", addr)
		}
	}
}

func TestSocketPath(t *testing.T) {
	for in, want := range map[string]string{
		"/run/csi/csi.sock":        "/run/csi/csi.sock",
		"unix:///run/csi/csi.sock": "/run/csi/csi.sock",
		"unix:/run/csi/csi.sock":   "/run/csi/csi.sock",
		"csi.sock":                 "csi.sock",
	} {
		if got, err := socketPath(in); err != nil || got != want {
			t.Errorf("socketPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestRequireProvisioning(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pluginCaps []csi.PluginCapability_Service_Type
		ctrlCaps   []csi.ControllerServiceCapability_RPC_Type
		wantErr    string
	}{
		{name: "no controller service", wantErr: "CONTROLLER_SERVICE",
			ctrlCaps: []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}},
		{name: "no create/delete", wantErr: "CREATE_DELETE_VOLUME",
			pluginCaps: []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE},
			ctrlCaps:   []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_LIST_VOLUMES}},
		{name: "all there",
			pluginCaps: []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE},
			ctrlCaps:   []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drv := &fakeDriver{name: "fake.csi.tether.io", pluginCaps: tc.pluginCaps, ctrlCaps: tc.ctrlCaps}
			c := connect(t, context.Background(), Options{Address: startDriver(t, drv), Timeout: time.Second})
			err := c.RequireProvisioning()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("RequireProvisioning: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), drv.name)):
				t.Errorf("RequireProvisioning error = %v, want one naming %s and the driver", err, tc.wantErr)
			}
			if !c.Capabilities().ControllerService && drv.ctrlCapsGot.Load() != 0 {
				t.Error("ControllerGetCapabilities was called without CONTROLLER_SERVICE")
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	drv := &fakeDriver{
		name: "fake.csi.tether.io",
		pluginCaps: []csi.PluginCapability_Service_Type{
			csi.PluginCapability_Service_CONTROLLER_SERVICE,
			csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS,
		},
		ctrlCaps: []csi.ControllerServiceCapability_RPC_Type{
			csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
			csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
			csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
			csi.ControllerServiceCapability_RPC_GET_CAPACITY,
			csi.ControllerServiceCapability_RPC_MODIFY_VOLUME,
			csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
			csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
			csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
			// Not tracked: the provisioner uses none of these.
			csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
			csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		},
	}
	c := connect(t, context.Background(), Options{Address: startDriver(t, drv), Timeout: time.Second})
	want := Capabilities{
		ControllerService: true, AccessibilityConstraints: true,
		CreateDelete: true, Clone: true, ListVolumes: true, GetCapacity: true,
		ModifyVolume: true, SingleNodeMultiWriter: true, Snapshots: true, PublishUnpublish: true,
	}
	if got := c.Capabilities(); got != want {
		t.Errorf("Capabilities() = %+v, want %+v", got, want)
	}

	drv = provisioningDriver()
	c = connect(t, context.Background(), Options{Address: startDriver(t, drv), Timeout: time.Second})
	want = Capabilities{ControllerService: true, CreateDelete: true}
	if got := c.Capabilities(); got != want {
		t.Errorf("Capabilities() = %+v, want %+v", got, want)
	}
}

func TestCalls(t *testing.T) {
	drv := provisioningDriver()
	reg := prometheus.NewRegistry()
	c := connect(t, context.Background(), Options{Address: startDriver(t, drv), Timeout: time.Second, Registerer: reg})
	ctx := context.Background()

	cv, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}})
	if err != nil || cv.GetVolume().GetVolumeId() != "vol-pvc-1" || cv.GetVolume().GetCapacityBytes() != 1<<20 {
		t.Errorf("CreateVolume = %v, %v", cv, err)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-pvc-1"}); err != nil {
		t.Errorf("DeleteVolume: %v", err)
	}
	if lv, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{}); err != nil || len(lv.GetEntries()) != 1 {
		t.Errorf("ListVolumes = %v, %v", lv, err)
	}
	if gc, err := c.GetCapacity(ctx, &csi.GetCapacityRequest{}); err != nil || gc.GetAvailableCapacity() != 42 {
		t.Errorf("GetCapacity = %v, %v", gc, err)
	}
	if err := c.Probe(ctx); err != nil {
		t.Errorf("Probe: %v", err)
	}
	drv.notReady.Store(1)
	if err := c.Probe(ctx); err == nil || !strings.Contains(err.Error(), "ready=false") {
		t.Errorf("Probe of a driver that is not ready = %v", err)
	}

	name := drv.name
	for _, s := range []struct {
		driver, method string
		want           uint64
	}{
		{"unknown", "/csi.v1.Identity/GetPluginInfo", 1},
		{name, "/csi.v1.Identity/GetPluginCapabilities", 1},
		{name, "/csi.v1.Controller/ControllerGetCapabilities", 1},
		{name, "/csi.v1.Controller/CreateVolume", 1},
		{name, "/csi.v1.Controller/DeleteVolume", 1},
		{name, "/csi.v1.Controller/ListVolumes", 1},
		{name, "/csi.v1.Controller/GetCapacity", 1},
		{name, "/csi.v1.Identity/Probe", 2},
		{"unknown", "/csi.v1.Identity/Probe", 1},
	} {
		if got := sampleCount(t, reg, s.driver, s.method, "OK"); got != s.want {
			t.Errorf("samples for %s %s OK = %d, want %d", s.driver, s.method, got, s.want)
		}
	}
}

// TestCallTimeout: a CreateVolume the driver has not answered within the
// timeout gives its caller DeadlineExceeded but goes on (its context is
// not cancelled); the next call with the same request takes its answer
// without a second call to the driver; a call with another request for
// the same volume meanwhile is refused with Aborted.
func TestCallTimeout(t *testing.T) {
	drv := provisioningDriver()
	entered := make(chan context.Context, 2)
	release := make(chan struct{})
	drv.createVolume = func(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
		entered <- ctx
		<-release
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-" + req.GetName()}}, nil
	}
	reg := prometheus.NewRegistry()
	const timeout = 200 * time.Millisecond
	c := connect(t, context.Background(), Options{Address: startDriver(t, drv), Timeout: timeout, Registerer: reg})

	req := &csi.CreateVolumeRequest{Name: "pvc-slow"}
	start := time.Now()
	_, err := c.CreateVolume(context.Background(), req)
	elapsed := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("CreateVolume error = %v, want DeadlineExceeded", err)
	}
	if elapsed < timeout {
		t.Errorf("CreateVolume returned after %v, before the timeout %v", elapsed, timeout)
	}
	var driverCtx context.Context
	select {
	case driverCtx = <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the CreateVolume handler never ran; the deadline did not come from a blocked call")
	}
	if err := driverCtx.Err(); err != nil {
		t.Fatalf("the driver's call ended with its caller's timeout: %v", err)
	}
	other := &csi.CreateVolumeRequest{Name: "pvc-slow", Parameters: map[string]string{"changed": "yes"}}
	if _, err := c.CreateVolume(context.Background(), other); status.Code(err) != codes.Aborted {
		t.Fatalf("another request while the first is at work: %v, want Aborted", err)
	}

	done := make(chan error, 1)
	go func() {
		resp, err := c.CreateVolume(context.Background(), req)
		if err == nil && resp.GetVolume().GetVolumeId() != "vol-pvc-slow" {
			err = fmt.Errorf("answer %v", resp)
		}
		done <- err
	}()
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the second call: %v", err)
	}
	select {
	case <-entered:
		t.Fatal("the second call reached the driver; it should have taken the first one's answer")
	default:
	}
	if got := sampleCount(t, reg, drv.name, "/csi.v1.Controller/CreateVolume", "OK"); got != 1 {
		t.Errorf("OK samples for CreateVolume = %d, want 1", got)
	}
	// Taken: the next call is a new one.
	if _, err := c.CreateVolume(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := len(entered); got != 1 {
		t.Errorf("the third call reached the driver %d times, want 1", got)
	}
}

func TestConnectTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	path := startDriver(t, provisioningDriver())
	connect(t, context.Background(), Options{Address: path, Timeout: time.Second, Registerer: reg})
	connect(t, context.Background(), Options{Address: path, Timeout: time.Second, Registerer: reg})
	if got := sampleCount(t, reg, "unknown", "/csi.v1.Identity/GetPluginInfo", "OK"); got != 2 {
		t.Errorf("GetPluginInfo samples = %d, want 2 (one per Connect)", got)
	}
}

func TestCallLogsHideSecrets(t *testing.T) {
	c := connect(t, context.Background(), Options{Address: startDriver(t, provisioningDriver()), Timeout: time.Second})
	logger, logs := newLogger(5)
	ctx := withLogger(context.Background(), logger)
	_, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name:    "pvc-secret",
		Secrets: map[string]string{"password": "hunter2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := logs.all()
	if !containsLine(lines, "Calling the CSI driver", "pvc-secret", "password", stripped) {
		t.Errorf("no request log line with the stripped secret; logs:\n%s", strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if strings.Contains(l, "hunter2") {
			t.Errorf("a log line shows the secret: %s", l)
		}
	}
}
