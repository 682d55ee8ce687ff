package request

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// VolumeName is the name of a claim's volume, in the CSI driver and as a PV:
// prefix-<claim UID>; with a positive uuidLength, the UID without dashes
// cut to that length (external-provisioner's --volume-name-uuid-length).
func VolumeName(prefix, claimUID string, uuidLength int) string {
	if uuidLength <= 0 {
		return prefix + "-" + claimUID
	}
	// As external-provisioner: dashes go before the cut.
	id := strings.ReplaceAll(claimUID, "-", "")
	return prefix + "-" + id[:min(uuidLength, len(id))]
}

// Options are the provisioner-wide settings that shape a request.
type Options struct {
	VolumeNamePrefix    string
	VolumeNameUUIDLen   int
	DefaultFSType       string
	ExtraCreateMetadata bool
	// Owner, when set, is this cluster's ID: each request then carries
	// the OwnerKey parameter, the mark that the orphan sweep deletes by
	// (with the class's reclaim policy). Set with --orphan-policy=delete.
	Owner string
	// SingleNodeMultiWriter: the driver has the SINGLE_NODE_MULTI_WRITER
	// controller capability, so ReadWriteOnce and ReadWriteOncePod map to
	// the single-node multi- and single-writer modes (see AccessModeOf).
	SingleNodeMultiWriter bool
	// ControllerPublishReadOnly is --controller-publish-readonly: the PV
	// of a claim whose only access mode is ReadOnlyMany gets csi.readOnly
	// (PublishReadOnly).
	ControllerPublishReadOnly bool
}

// Input is one claim's provisioning input, already read from the API.
type Input struct {
	Claim  *v1.PersistentVolumeClaim
	Class  *storagev1.StorageClass
	Params ClassParams
	// Secrets are the provisioner secret's data, nil for none.
	Secrets map[string]string
	// Topology is the accessibility requirement, nil for none.
	Topology *csi.TopologyRequirement
	// Source is the content source for a clone, nil for none.
	Source *csi.VolumeContentSource
	// Name, when set, is the volume's name (the one an in-flight record
	// names); else it is derived from the claim's UID.
	Name string
	// Mutable are the parameters of the claim's VolumeAttributesClass,
	// sent as mutable_parameters; nil for none.
	Mutable map[string]string
}

// Build makes the CreateVolume request for a claim. It is pure.
func Build(in Input, o Options) (*csi.CreateVolumeRequest, error) {
	claim := in.Claim
	name := in.Name
	if name == "" {
		name = VolumeName(o.VolumeNamePrefix, string(claim.UID), o.VolumeNameUUIDLen)
	}
	caps, err := VolumeCapabilities(claim, CapabilityOptions{FSType: in.Params.FSType, DefaultFSType: o.DefaultFSType,
		MountOptions: in.Class.MountOptions, SingleNodeMultiWriter: o.SingleNodeMultiWriter})
	if err != nil {
		return nil, err
	}
	capRange, err := capacityRange(claim)
	if err != nil {
		return nil, err
	}
	params := in.Params.Driver
	if o.ExtraCreateMetadata {
		params = withMetadata(params, claim.Namespace, claim.Name, name)
	}
	if o.Owner != "" {
		params = maps.Clone(params)
		if params == nil {
			params = map[string]string{}
		}
		params[OwnerKey] = OwnerMark(o.Owner, ReclaimPolicy(in.Class))
	}
	return &csi.CreateVolumeRequest{
		Name:                      name,
		CapacityRange:             capRange,
		VolumeCapabilities:        caps,
		Parameters:                params,
		Secrets:                   in.Secrets,
		AccessibilityRequirements: in.Topology,
		VolumeContentSource:       in.Source,
		MutableParameters:         maps.Clone(in.Mutable),
	}, nil
}

// maxBytes is the largest size a CSI request can carry (an int64). Above it,
// Quantity.Value() gives 0 or a wrapped, even negative, number.
var maxBytes = *resource.NewQuantity(math.MaxInt64, resource.BinarySI)

func capacityRange(claim *v1.PersistentVolumeClaim) (*csi.CapacityRange, error) {
	req, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]
	if !ok {
		return nil, errors.New("the claim requests no storage")
	}
	if req.Sign() < 0 {
		return nil, fmt.Errorf("the claim requests a negative size %s", req.String())
	}
	if req.Cmp(maxBytes) > 0 {
		return nil, fmt.Errorf("the claim requests %s, more than the %d bytes a CSI request can carry", req.String(), int64(math.MaxInt64))
	}
	r := &csi.CapacityRange{RequiredBytes: req.Value()}
	if limit, ok := claim.Spec.Resources.Limits[v1.ResourceStorage]; ok {
		if limit.Cmp(req) < 0 {
			return nil, fmt.Errorf("the claim's storage limit %s is below its request %s", limit.String(), req.String())
		}
		if limit.Cmp(maxBytes) <= 0 { // a larger limit is no limit
			r.LimitBytes = limit.Value()
		}
	}
	return r, nil
}

// CapabilityOptions shape the capabilities of a request.
type CapabilityOptions struct {
	// FSType is the class's fsType; DefaultFSType is used when it is empty.
	FSType, DefaultFSType string
	// MountOptions are the class's mount options.
	MountOptions []string
	// SingleNodeMultiWriter: the driver has the SINGLE_NODE_MULTI_WRITER
	// controller capability.
	SingleNodeMultiWriter bool
}

// VolumeCapabilities maps a claim's access modes and volumeMode to CSI
// capabilities: one per access mode, block or mount (with the class's
// fsType, else the default, and its mount options).
func VolumeCapabilities(claim *v1.PersistentVolumeClaim, o CapabilityOptions) ([]*csi.VolumeCapability, error) {
	if len(claim.Spec.AccessModes) == 0 {
		return nil, errors.New("the claim has no access modes")
	}
	block := claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == v1.PersistentVolumeBlock
	if claim.Spec.VolumeMode != nil && !block && *claim.Spec.VolumeMode != v1.PersistentVolumeFilesystem {
		return nil, fmt.Errorf("unknown volumeMode %q", *claim.Spec.VolumeMode)
	}
	fsType := o.FSType
	if fsType == "" {
		fsType = o.DefaultFSType
	}
	var out []*csi.VolumeCapability
	for _, m := range claim.Spec.AccessModes {
		mode, err := AccessModeOf(m, o.SingleNodeMultiWriter)
		if err != nil {
			return nil, err
		}
		c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
		if block {
			c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		} else {
			c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: o.MountOptions}}
		}
		out = append(out, c)
	}
	return out, nil
}

// AccessModeOf is the CSI access mode of one Kubernetes access mode, as
// external-provisioner maps it. A driver with the SINGLE_NODE_MULTI_WRITER
// controller capability gets ReadWriteOnce as SINGLE_NODE_MULTI_WRITER and
// ReadWriteOncePod as SINGLE_NODE_SINGLE_WRITER; a driver without it knows
// neither mode, and gets SINGLE_NODE_WRITER for both (Kubernetes, not the
// driver, then keeps a ReadWriteOncePod volume to one pod).
func AccessModeOf(m v1.PersistentVolumeAccessMode, singleNodeMultiWriter bool) (csi.VolumeCapability_AccessMode_Mode, error) {
	switch m {
	case v1.ReadWriteOnce:
		if singleNodeMultiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, nil
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	case v1.ReadWriteOncePod:
		if singleNodeMultiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, nil
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	case v1.ReadOnlyMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, nil
	case v1.ReadWriteMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, nil
	}
	return 0, fmt.Errorf("unknown access mode %q", m)
}
