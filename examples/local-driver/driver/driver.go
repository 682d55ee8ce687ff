// Package driver is an example local CSI driver: each volume is a folder
// under a root folder of the node, accounted against a fixed node capacity,
// and published by bind-mounting the folder. It serves the identity,
// controller and node services on one socket, one instance per node.
//
// The gRPC methods (server.go) only check the request's key and take the
// volume's lock; the work is in unlocked methods of Driver (controller.go,
// node.go), which assume the caller holds the lock.
package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"

	tcsi "github.com/tether-csi/tether/pkg/csi"
)

// DefaultName is the driver's default name.
const DefaultName = "local.csi.tether.dev"

// DefaultVolumeSize is the capacity of a volume whose request names none.
const DefaultVolumeSize int64 = 1 << 30

// Config describes one node's driver.
type Config struct {
	Name          string // CSI driver name
	VendorVersion string
	NodeID        string
	Root          string // folder holding the volumes
	Capacity      int64  // bytes the volumes may take in total
	// DefaultVolumeSize is used when a request has no required size; zero
	// means the package's DefaultVolumeSize.
	DefaultVolumeSize int64
	// SlowCreate delays each CreateVolume answer after the volume is made,
	// to widen the window in which a provisioner can die (chaos tests).
	SlowCreate time.Duration
}

// Driver is the local driver of one node.
type Driver struct {
	cfg   Config
	store *store
	snaps *snapStore
	locks *keyLocks
}

// New checks cfg and loads the volumes under cfg.Root, finishing or undoing
// what a crash interrupted.
func New(cfg Config) (*Driver, error) {
	switch {
	case cfg.Name == "":
		return nil, errors.New("no driver name")
	case cfg.NodeID == "":
		return nil, errors.New("no node ID")
	case cfg.Root == "":
		return nil, errors.New("no root folder")
	case cfg.Capacity < 0:
		return nil, errors.New("negative capacity")
	}
	if cfg.DefaultVolumeSize <= 0 {
		cfg.DefaultVolumeSize = DefaultVolumeSize
	}
	if cfg.VendorVersion == "" {
		cfg.VendorVersion = "dev"
	}
	st, err := openStore(cfg.Root, cfg.Capacity)
	if err != nil {
		return nil, fmt.Errorf("loading volumes from %s: %w", cfg.Root, err)
	}
	snaps, err := openSnapStore(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("loading snapshots from %s: %w", cfg.Root, err)
	}
	return &Driver{cfg: cfg, store: st, snaps: snaps, locks: newKeyLocks()}, nil
}

// TopologyKey is the key of the driver's topology segment.
func TopologyKey(driverName string) string { return "topology." + driverName + "/node" }

// Register adds the identity, controller and node services to s.
func (d *Driver) Register(s *grpc.Server) {
	csi.RegisterIdentityServer(s, &identityServer{d: d})
	csi.RegisterControllerServer(s, &controllerServer{d: d})
	csi.RegisterNodeServer(s, &nodeServer{d: d})
}

// topology is this node's accessible topology.
func (d *Driver) topology() *csi.Topology {
	return &csi.Topology{Segments: map[string]string{TopologyKey(d.cfg.Name): d.cfg.NodeID}}
}

// onThisNode reports whether t describes this node: each of its segments is
// one of ours (no segments: anywhere).
func (d *Driver) onThisNode(t *csi.Topology) bool {
	ours := d.topology().Segments
	for k, v := range t.GetSegments() {
		if ours[k] != v {
			return false
		}
	}
	return true
}

// lockVolume takes the lock of volume id for the rest of a call.
func (d *Driver) lockVolume(ctx context.Context, id string) (func(), error) {
	unlock, err := d.locks.lock(ctx, id)
	if err != nil {
		return nil, status.FromContextError(err).Err()
	}
	return unlock, nil
}

// LogCalls is a gRPC interceptor that logs each call (secrets stripped)
// at -v=5 and each failure at -v=2.
func LogCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	if v := klog.V(5); v.Enabled() {
		if m, ok := req.(proto.Message); ok {
			v.InfoS("CSI call", "method", info.FullMethod, "request", tcsi.StripSecrets(m))
		}
	}
	resp, err := handler(ctx, req)
	if err != nil {
		klog.V(2).InfoS("CSI call failed", "method", info.FullMethod, "code", status.Code(err), "err", err, "duration", time.Since(start))
	} else if v := klog.V(5); v.Enabled() {
		if m, ok := resp.(proto.Message); ok {
			v.InfoS("CSI call done", "method", info.FullMethod, "response", tcsi.StripSecrets(m), "duration", time.Since(start))
		}
	}
	return resp, err
}

// checkCapabilities returns an InvalidArgument error unless caps is
// non-empty and the driver supports each capability.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "no volume capabilities")
	}
	for _, c := range caps {
		if err := checkCapability(c); err != nil {
			return err
		}
	}
	return nil
}

// checkCapability accepts a filesystem volume used by one node; the file
// system type and mount flags are ignored (the folder has the file system
// of the root folder).
func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return status.Error(codes.InvalidArgument, "no volume capability")
	}
	switch {
	case c.GetBlock() != nil:
		return status.Error(codes.InvalidArgument, "block volumes are not supported: volumes are folders")
	case c.GetMount() == nil:
		return status.Error(codes.InvalidArgument, "volume capability has no access type")
	}
	switch m := c.GetAccessMode().GetMode(); m {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:
		return nil
	case csi.VolumeCapability_AccessMode_UNKNOWN:
		return status.Error(codes.InvalidArgument, "volume capability has no access mode")
	default:
		return status.Errorf(codes.InvalidArgument, "access mode %s is not supported: a local volume is used by one node and the driver has no SINGLE_NODE_MULTI_WRITER capability", m)
	}
}
