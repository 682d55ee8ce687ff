package csi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// DefaultTimeout is the per-call timeout used when Options.Timeout is not set.
const DefaultTimeout = 10 * time.Second

// The wait for the driver: Probe is retried after 100ms, 200ms, ... up to 5s
// between attempts, until the driver is ready or the context ends.
var probeBackoff = wait.Backoff{
	Duration: 100 * time.Millisecond,
	Factor:   2,
	Jitter:   0.1,
	Steps:    math.MaxInt32,
	Cap:      5 * time.Second,
}

// Options say how to reach the CSI driver.
type Options struct {
	// Address is the driver's unix socket, with or without "unix://".
	Address string
	// Timeout bounds every single CSI call; <= 0 means DefaultTimeout.
	Timeout time.Duration
	// Registerer receives the operations histogram; nil means no metrics.
	Registerer prometheus.Registerer
}

// Capabilities are what the driver said it offers.
type Capabilities struct {
	// Plugin capabilities (GetPluginCapabilities).
	ControllerService, AccessibilityConstraints bool
	// Controller capabilities (ControllerGetCapabilities).
	CreateDelete, Clone, ListVolumes, GetCapacity bool
	// ModifyVolume (MODIFY_VOLUME): a claim may name a
	// VolumeAttributesClass. SingleNodeMultiWriter
	// (SINGLE_NODE_MULTI_WRITER): ReadWriteOnce and ReadWriteOncePod map to
	// the single-node multi- and single-writer modes.
	ModifyVolume, SingleNodeMultiWriter bool
	// Snapshots (CREATE_DELETE_SNAPSHOT): claims may be restored from a
	// VolumeSnapshot.
	Snapshots bool
	// PublishUnpublish (PUBLISH_UNPUBLISH_VOLUME): the driver attaches
	// volumes to nodes, and a volume is deleted only once detached (as in
	// external-provisioner, which watches VolumeAttachments only then).
	PublishUnpublish bool
}

// Conn is a ready connection to one CSI driver. It is safe for concurrent use.
type Conn struct {
	address    string
	timeout    time.Duration
	cc         *grpc.ClientConn
	identity   csi.IdentityClient
	controller csi.ControllerClient
	ops        *prometheus.HistogramVec // nil: no metrics
	metricName atomic.Pointer[string]   // driver_name label
	driverName string
	caps       Capabilities
	onRecheck  func() // tests: called after a reconnection found the driver unchanged
	// creates and deletes: the calls that outlived their callers' timeout.
	creates outliving[*csi.CreateVolumeResponse]
	deletes outliving[*csi.DeleteVolumeResponse]
}

// Connect dials the driver, waits until its Probe says ready (retrying with
// backoff until ctx ends), then reads its name and capabilities.
func Connect(ctx context.Context, o Options) (*Conn, error) {
	logger := klog.FromContext(ctx)
	path, err := socketPath(o.Address)
	if err != nil {
		return nil, err
	}
	c := &Conn{address: path, timeout: o.Timeout}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	unknown := "unknown"
	c.metricName.Store(&unknown)
	if o.Registerer != nil {
		if c.ops, err = operationsHistogram(o.Registerer); err != nil {
			return nil, err
		}
	}

	dial := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
	c.cc, err = grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial),
		grpc.WithAuthority("localhost"),
		// gRPC's own reconnect backoff starts at 1s and grows to 120s;
		// keep it close to our probe backoff so a late socket is found soon.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   5 * time.Second,
			},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithChainUnaryInterceptor(c.intercept),
		// Never idle: a connection that is not Ready was lost (see Watch).
		grpc.WithIdleTimeout(0),
	)
	if err != nil {
		return nil, fmt.Errorf("cannot set up a gRPC client for the CSI driver at %s: %w", path, err)
	}
	c.identity = csi.NewIdentityClient(c.cc)
	c.controller = csi.NewControllerClient(c.cc)

	if err := c.setUp(ctx, logger); err != nil {
		_ = c.cc.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) setUp(ctx context.Context, logger klog.Logger) error {
	logger.Info("Connecting to the CSI driver", "address", c.address, "timeout", c.timeout)
	if err := c.waitReady(ctx, logger); err != nil {
		return err
	}
	name, caps, err := c.readDriver(ctx, logger)
	if err != nil {
		return err
	}
	c.driverName, c.caps = name, caps
	return nil
}

// readDriver asks the driver for its name and capabilities.
func (c *Conn) readDriver(ctx context.Context, logger klog.Logger) (string, Capabilities, error) {
	var caps Capabilities
	cctx, cancel := c.withTimeout(ctx)
	info, err := c.identity.GetPluginInfo(cctx, &csi.GetPluginInfoRequest{})
	cancel()
	if err != nil {
		return "", caps, fmt.Errorf("the CSI driver at %s did not answer GetPluginInfo: %w", c.address, err)
	}
	name := info.GetName()
	if name == "" {
		return "", caps, fmt.Errorf("the CSI driver at %s returned an empty name from GetPluginInfo", c.address)
	}
	if c.driverName == "" {
		c.metricName.Store(&name) // the label of the calls from here on
	}
	logger.Info("Found the CSI driver", "address", c.address, "driver", name,
		"vendorVersion", info.GetVendorVersion())

	cctx, cancel = c.withTimeout(ctx)
	pcaps, err := c.identity.GetPluginCapabilities(cctx, &csi.GetPluginCapabilitiesRequest{})
	cancel()
	if err != nil {
		return "", caps, fmt.Errorf("the CSI driver %q did not answer GetPluginCapabilities: %w", name, err)
	}
	for _, pc := range pcaps.GetCapabilities() {
		switch pc.GetService().GetType() {
		case csi.PluginCapability_Service_CONTROLLER_SERVICE:
			caps.ControllerService = true
		case csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS:
			caps.AccessibilityConstraints = true
		}
	}

	if caps.ControllerService {
		cctx, cancel = c.withTimeout(ctx)
		ccaps, err := c.controller.ControllerGetCapabilities(cctx, &csi.ControllerGetCapabilitiesRequest{})
		cancel()
		if err != nil {
			return "", caps, fmt.Errorf("the CSI driver %q did not answer ControllerGetCapabilities: %w", name, err)
		}
		for _, cc := range ccaps.GetCapabilities() {
			switch cc.GetRpc().GetType() {
			case csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME:
				caps.CreateDelete = true
			case csi.ControllerServiceCapability_RPC_CLONE_VOLUME:
				caps.Clone = true
			case csi.ControllerServiceCapability_RPC_LIST_VOLUMES:
				caps.ListVolumes = true
			case csi.ControllerServiceCapability_RPC_GET_CAPACITY:
				caps.GetCapacity = true
			case csi.ControllerServiceCapability_RPC_MODIFY_VOLUME:
				caps.ModifyVolume = true
			case csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
				caps.SingleNodeMultiWriter = true
			case csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT:
				caps.Snapshots = true
			case csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME:
				caps.PublishUnpublish = true
			}
		}
	}
	logger.Info("CSI driver capabilities", "driver", name,
		"controllerService", caps.ControllerService,
		"accessibilityConstraints", caps.AccessibilityConstraints,
		"createDelete", caps.CreateDelete, "clone", caps.Clone,
		"listVolumes", caps.ListVolumes, "getCapacity", caps.GetCapacity,
		"modifyVolume", caps.ModifyVolume, "singleNodeMultiWriter", caps.SingleNodeMultiWriter, "snapshots", caps.Snapshots,
		"publishUnpublish", caps.PublishUnpublish)
	return name, caps, nil
}

// ErrDriverChanged is wrapped by Watch's error when the driver came back
// with another name or other capabilities.
var ErrDriverChanged = errors.New("the CSI driver changed")

// Watch follows the connection to the driver until ctx ends (then it
// returns nil). When the connection is lost and made again, as when the
// driver restarted, it waits for the driver to be ready and reads its name
// and capabilities again. If they differ from what Connect read, it
// returns an error wrapping ErrDriverChanged: the caller should exit, so
// that it starts again on what the driver now offers (external-provisioner
// exits on every lost connection; this exits only when it matters). It
// returns any other error of that second reading too.
func (c *Conn) Watch(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("address", c.address)
	lost := false
	markLost := func() {
		if !lost {
			lost = true
			logger.Info("Lost the connection to the CSI driver; reconnecting", "driver", c.driverName)
		}
	}
	for {
		state := c.cc.GetState()
		switch state {
		case connectivity.Shutdown:
			return nil // closed
		case connectivity.Ready:
			if lost {
				lost = false
				if err := c.recheck(ctx, logger); err != nil || ctx.Err() != nil {
					return err
				}
				continue // the connection may have gone again meanwhile
			}
		default:
			markLost()
			if state == connectivity.Idle {
				// Reconnect now, not at the next call, to notice a new driver.
				c.cc.Connect()
			}
		}
		if !c.cc.WaitForStateChange(ctx, state) {
			return nil
		}
		if state == connectivity.Ready {
			// It left Ready: even if it is back by now, on a new connection.
			markLost()
		}
	}
}

// recheck reads the driver's name and capabilities on a new connection and
// compares them with the first reading.
func (c *Conn) recheck(ctx context.Context, logger klog.Logger) error {
	if err := c.waitReady(ctx, logger); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	name, caps, err := c.readDriver(ctx, logger)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("reading the CSI driver again after it reconnected: %w", err)
	}
	if err := compareDriver(c.driverName, c.caps, name, caps); err != nil {
		return err
	}
	logger.Info("Reconnected to the CSI driver; its name and capabilities are unchanged", "driver", name)
	if c.onRecheck != nil {
		c.onRecheck()
	}
	return nil
}

// compareDriver says how a driver that came back differs from what it
// was, wrapping ErrDriverChanged; nil when it is the same.
func compareDriver(oldName string, oldCaps Capabilities, newName string, newCaps Capabilities) error {
	var diffs []string
	if newName != oldName {
		diffs = append(diffs, fmt.Sprintf("name %q, was %q", newName, oldName))
	}
	if newCaps != oldCaps {
		diffs = append(diffs, fmt.Sprintf("capabilities %+v, were %+v", newCaps, oldCaps))
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("%w after reconnecting: %s; restart to use what it offers now", ErrDriverChanged, strings.Join(diffs, "; "))
}

// waitReady probes until the driver is ready. Every error is retried except
// Unimplemented: Probe is mandatory, so that socket is not a CSI driver.
func (c *Conn) waitReady(ctx context.Context, logger klog.Logger) error {
	b := probeBackoff
	reason := "" // why the driver was not ready, for the log and the final error
	hinted := false
	giveUp := func(attempts int) error {
		return fmt.Errorf("gave up waiting for the CSI driver at %s to become ready after %d attempts (%w); last time %s",
			c.address, attempts, context.Cause(ctx), reason)
	}
	for attempt := 1; ; attempt++ {
		ready, err := c.probe(ctx)
		switch {
		case err == nil && ready:
			logger.Info("The CSI driver is ready", "address", c.address, "attempts", attempt)
			return nil
		case status.Code(err) == codes.Unimplemented:
			return fmt.Errorf("the server at %s does not implement the CSI Probe call, so it is no CSI driver: %w", c.address, err)
		case err == nil:
			reason = "it answered Probe with ready=false"
		case ended(ctx) && reason != "":
			// The probe was cut short by ctx: the previous reason says more.
		default:
			reason = "Probe failed: " + err.Error()
			if hint := socketHint(err, os.Getuid()); hint != "" {
				reason += "; " + hint
				if !hinted {
					hinted = true
					logger.Error(err, "Cannot open the CSI driver's socket", "address", c.address, "hint", hint)
				}
			}
		}
		if ended(ctx) {
			<-ctx.Done() // at most a moment away
			return giveUp(attempt)
		}
		delay := b.Step()
		logger.Info("Waiting for the CSI driver", "address", c.address, "attempt", attempt,
			"reason", reason, "retryIn", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return giveUp(attempt)
		case <-t.C:
		}
		// Make gRPC try the socket now rather than on its own schedule.
		c.cc.ResetConnectBackoff()
	}
}

// ended says whether ctx is done or its deadline has passed; gRPC may see the
// deadline pass a moment before ctx's own timer cancels it.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// probe makes one Probe call. A response without "ready" means ready.
func (c *Conn) probe(ctx context.Context) (bool, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.identity.Probe(ctx, &csi.ProbeRequest{})
	if err != nil {
		return false, err
	}
	if r := resp.GetReady(); r != nil {
		return r.GetValue(), nil
	}
	return true, nil
}

// CheckAddress checks a driver address as Connect would take it, without
// dialing: a unix socket path, with or without "unix://".
func CheckAddress(address string) error {
	_, err := socketPath(address)
	return err
}

// socketPath turns "unix:///path", "unix:path" or "/path" into "/path".
func socketPath(address string) (string, error) {
	p := address
	if s, ok := strings.CutPrefix(p, "unix://"); ok {
		p = s
	} else if s, ok := strings.CutPrefix(p, "unix:"); ok {
		p = s
	}
	if p == "" {
		return "", errors.New("no CSI driver address given; it must be a unix socket path")
	}
	return p, nil
}

func (c *Conn) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// DriverName is the name the driver gave in GetPluginInfo.
func (c *Conn) DriverName() string { return c.driverName }

// Capabilities are the plugin and controller capabilities read by Connect.
func (c *Conn) Capabilities() Capabilities { return c.caps }

// RequireProvisioning says what the driver lacks to provision volumes, if anything.
func (c *Conn) RequireProvisioning() error {
	if !c.caps.ControllerService {
		return fmt.Errorf("the CSI driver %q does not offer CONTROLLER_SERVICE; a provisioner needs it", c.driverName)
	}
	if !c.caps.CreateDelete {
		return fmt.Errorf("the CSI driver %q does not offer the CREATE_DELETE_VOLUME controller capability; a provisioner needs it", c.driverName)
	}
	return nil
}

// CreateVolume calls the driver with the per-call timeout. Errors are the
// driver's gRPC status, unwrapped, so status.Code works on them.
// A call the driver has not answered within the timeout goes on, and the
// next one for the same volume waits for its answer (see outlive.go).
func (c *Conn) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return c.creates.call(ctx, req.GetName(), req, c.timeout, func(ctx context.Context) (*csi.CreateVolumeResponse, error) {
		return c.controller.CreateVolume(ctx, req)
	})
}

// DeleteVolume calls the driver with the per-call timeout; a call that
// outlives it goes on, as CreateVolume's.
func (c *Conn) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return c.deletes.call(ctx, req.GetVolumeId(), req, c.timeout, func(ctx context.Context) (*csi.DeleteVolumeResponse, error) {
		return c.controller.DeleteVolume(ctx, req)
	})
}

// ListVolumes calls the driver with the per-call timeout.
func (c *Conn) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	return c.controller.ListVolumes(ctx, req)
}

// GetCapacity calls the driver with the per-call timeout.
func (c *Conn) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	return c.controller.GetCapacity(ctx, req)
}

// Probe asks the driver once whether it is ready.
func (c *Conn) Probe(ctx context.Context) error {
	ready, err := c.probe(ctx)
	if err != nil {
		return fmt.Errorf("probing the CSI driver %q failed: %w", c.driverName, err)
	}
	if !ready {
		return fmt.Errorf("the CSI driver %q answered Probe with ready=false", c.driverName)
	}
	return nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.cc.Close() }
