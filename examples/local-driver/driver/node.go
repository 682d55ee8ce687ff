package driver

import (
	"errors"
	"io/fs"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// The node's work. Each method expects the caller to hold the volume's lock
// (see server.go).

// nodePublishVolume bind-mounts the volume's folder at the target path,
// read-only when the request or the access mode says so. Publishing again
// what is already there succeeds.
func (d *Driver) nodePublishVolume(req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "no volume ID")
	case target == "":
		return nil, status.Error(codes.InvalidArgument, "no target path")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	if _, ok := d.store.get(id); !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
	}
	if err := d.store.ensureFolder(id); err != nil {
		return nil, err
	}
	source := d.store.path(id)
	readOnly := req.GetReadonly() ||
		req.GetVolumeCapability().GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY

	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "making target %s: %v", target, err)
	}
	mounted, err := isMountPoint(target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reading the mount table: %v", err)
	}
	if !mounted {
		if err := bindMount(source, target, readOnly); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		klog.V(2).InfoS("Published volume", "volumeID", id, "target", target, "readOnly", readOnly)
		return &csi.NodePublishVolumeResponse{}, nil
	}

	// Something is mounted there already: fine if it is this volume in the
	// same mode.
	same, err := sameFolder(target, source)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "checking target %s: %v", target, err)
	}
	if !same {
		return nil, status.Errorf(codes.AlreadyExists, "target %s holds another mount", target)
	}
	ro, err := isReadOnlyMount(target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "checking target %s: %v", target, err)
	}
	switch {
	case ro == readOnly:
		return &csi.NodePublishVolumeResponse{}, nil
	case readOnly:
		// Read-write where read-only is asked: a publish that stopped
		// between the bind and the remount of bindReadOnly's fallback.
		// It is mounted again read-only (a remount would not reach the
		// propagated copies); that only takes writing away, never grants it.
		if err := unix.Unmount(target, 0); err != nil {
			return nil, status.Error(codes.Internal, mountError("unmounting "+target, err).Error())
		}
		if err := bindMount(source, target, true); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		return &csi.NodePublishVolumeResponse{}, nil
	default:
		return nil, status.Errorf(codes.AlreadyExists, "volume %s is published read-only at %s; read-write was asked", id, target)
	}
}

// nodeUnpublishVolume unmounts the target path and removes it. A target
// that is not mounted, or not there, is already unpublished; so is the
// target of a volume that no longer exists (the mount is undone all the
// same, and the CO can finish its clean-up).
func (d *Driver) nodeUnpublishVolume(req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "no volume ID")
	case target == "":
		return nil, status.Error(codes.InvalidArgument, "no target path")
	}
	if err := unmountAll(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	// Remove, not RemoveAll: a target that still has files in it is not an
	// unmounted bind mount, and its files are not ours to delete.
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing target %s: %v", target, err)
	}
	klog.V(2).InfoS("Unpublished volume", "volumeID", id, "target", target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
