package provisioner

import (
	"context"
	"errors"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/provisioner/claimlock"
	"github.com/tether-csi/tether/pkg/provisioner/libv8"
	"github.com/tether-csi/tether/pkg/provisioner/records"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// Driver is the part of a CSI connection the provisioner uses.
type Driver interface {
	DriverName() string
	CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error)
	DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error)
}

// Options configure a Provisioner.
type Options struct {
	Client kubernetes.Interface
	Driver Driver
	// Request shapes CreateVolume requests.
	Request request.Options
	// Topology: whether the driver takes accessibility requirements
	// (VOLUME_ACCESSIBILITY_CONSTRAINTS), and the --strict-topology and
	// --immediate-topology settings.
	Topology, StrictTopology, ImmediateTopology bool
	// Clone and GetCapacity: whether the driver has CLONE_VOLUME and GET_CAPACITY.
	Clone, GetCapacity bool
	// PublishUnpublish: whether the driver has PUBLISH_UNPUBLISH_VOLUME;
	// only then does a deletion wait for the volume's detach (as in
	// external-provisioner), and VolumeAttachments is needed.
	PublishUnpublish bool
	// Snapshots: whether the driver has CREATE_DELETE_SNAPSHOT, which a
	// restore from a VolumeSnapshot needs (as in external-provisioner).
	// SnapshotClient reads VolumeSnapshots and their contents; nil when
	// the cluster has no snapshot API, and then restores fail.
	Snapshots      bool
	SnapshotClient snapclientset.Interface
	// PreventVolumeModeConversion is --prevent-volume-mode-conversion: a
	// restore into another volume mode than the snapshot's source needs
	// request.AnnAllowVolumeModeChange on the snapshot's content.
	PreventVolumeModeConversion bool
	// ModifyVolume: whether the driver has MODIFY_VOLUME. As in
	// external-provisioner, a claim that names a VolumeAttributesClass
	// needs it.
	ModifyVolume bool
	// Clock is the time (nil: time.Now).
	Clock func() time.Time
	// Locks serialise the work on each claim between the actors that share
	// it (Provision, the in-flight reconciler, and the orphan sweep of
	// package sweep when it is given the same set); nil makes a set of the
	// Provisioner's own.
	Locks *claimlock.Set
	// Node, when set, is node-deployment mode.
	Node *NodeDeployment
	// Identity goes into every PV's volume attributes.
	Identity string
	// MigratedFrom is the in-tree plugin this driver takes over under CSI
	// migration (kubernetes.io/aws-ebs for ebs.csi.aws.com), "" for none:
	// claims of its classes are provisioned with translated parameters and
	// saved as in-tree PVs, as external-provisioner does.
	MigratedFrom string
	// Changed, if set, is called with the PV after a volume was created or
	// deleted (the capacity publisher refreshes its class and segments then).
	Changed func(*v1.PersistentVolume)

	// Claims and Volumes are the caches of the claims and PVs this
	// provisioner answers for (package scope), or of all of them.
	Claims  corelisters.PersistentVolumeClaimLister
	Volumes corelisters.PersistentVolumeLister
	// VolumeNames, when Volumes keeps only some PVs, holds the names of
	// every PV (scope.Seen); nil when it keeps them all.
	VolumeNames interface{ Has(name string) bool }
	// GoneClaims, if set, holds UIDs of claims whose deletion the claim
	// watch delivered (scope.Gone): the check before a PV's finalizer goes
	// (dropBeforeRelease) reads such a claim from it, not from the API
	// server.
	GoneClaims interface{ Has(uid types.UID) bool }

	Classes  storagelisters.StorageClassLister
	Nodes    corelisters.NodeLister
	CSINodes storagelisters.CSINodeLister
	// VolumeAttachments is read only with PublishUnpublish.
	VolumeAttachments storagelisters.VolumeAttachmentLister
	// VolumeAttributesClasses, when nil, makes every claim that names a
	// VolumeAttributesClass fail.
	VolumeAttributesClasses storagelisters.VolumeAttributesClassLister
}

// NodeDeployment runs one provisioner per node, beside that node's driver
// (external-provisioner's --node-deployment). Each provisions only claims
// whose selected node is its own, and deletes only volumes on its node.
type NodeDeployment struct {
	NodeName string
	// ImmediateBinding lets instances compete for claims of Immediate
	// classes: after a delay between BaseDelay and MaxDelay (doubling with
	// each failed attempt), an instance whose driver has room sets the
	// claim's selected node to its own node; the first write wins.
	ImmediateBinding    bool
	BaseDelay, MaxDelay time.Duration
}

// CapacityDriver is the optional GetCapacity call.
type CapacityDriver interface {
	GetCapacity(context.Context, *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error)
}

// Provisioner implements the library's Provisioner, Qualifier and
// DeletionGuard interfaces. It is small: the translation is in pure
// functions, and the library saves the PVs it returns.
type Provisioner struct {
	o      Options
	locks  *claimlock.Set
	owners owners
	// record writes the in-flight record on claims.
	record   *records.Writer
	handoffs handoffs
	// saves follows the library's saves of the PVs Provision returns.
	saves *libv8.Saves
	// secretsUsed keeps, per claim in flight, the provisioner secret its
	// CreateVolume was given, for a clean-up that finds it gone.
	secretsUsed secretsUsed
	// answers: per claim in flight, whether every CreateVolume made under
	// the record this process wrote answered that it made no volume.
	answers createAnswers
	// detach: the PVs whose deletion waits for a detach.
	detach detachWaits
	// deleted: the PVs (by UID) whose volume this process deleted, until
	// their deletion finalizer is off.
	deleted deletedVolumes
	// infeasible: the claims that wait for an edit after the driver
	// refused their request.
	infeasible *infeasibleWaits
	// now is Options.Clock.
	now func() time.Time
}

var (
	_ controller.Provisioner      = (*Provisioner)(nil)
	_ controller.Qualifier        = (*Provisioner)(nil)
	_ controller.DeletionGuard    = (*Provisioner)(nil)
	_ controller.BlockProvisioner = (*Provisioner)(nil)
)

// New checks the options and returns a Provisioner.
func New(o Options) (*Provisioner, error) {
	if o.Client == nil || o.Driver == nil {
		return nil, errors.New("provisioner: a client and a driver are required")
	}
	if o.Claims == nil || o.Volumes == nil || o.Classes == nil || o.Nodes == nil || o.CSINodes == nil {
		return nil, errors.New("provisioner: listers for claims, volumes, classes, nodes and CSINodes are required")
	}
	if o.PublishUnpublish && o.VolumeAttachments == nil {
		return nil, errors.New("provisioner: a driver with PUBLISH_UNPUBLISH_VOLUME needs the VolumeAttachment lister")
	}
	if o.Node != nil {
		if o.Node.NodeName == "" {
			return nil, errors.New("provisioner: node-deployment mode needs the node's name (NODE_NAME)")
		}
		if o.Node.BaseDelay <= 0 || o.Node.MaxDelay < o.Node.BaseDelay {
			return nil, errors.New("provisioner: node-deployment delays must be positive, the maximum no smaller than the base")
		}
		// The volume must land on this node: ask only for its segment.
		o.StrictTopology = true
	}
	if o.Request.VolumeNamePrefix == "" {
		return nil, errors.New("provisioner: the volume name prefix is empty")
	}
	if o.Locks == nil {
		o.Locks = &claimlock.Set{}
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	node := ""
	if o.Node != nil {
		node = o.Node.NodeName
	}
	return &Provisioner{o: o, locks: o.Locks, now: o.Clock, record: &records.Writer{Client: o.Client, Driver: o.Driver.DriverName(), Node: node}, handoffs: newHandoffs(), saves: libv8.NewSaves(), secretsUsed: newSecretsUsed(), deleted: newDeletedVolumes(),
		answers: newCreateAnswers(), infeasible: newInfeasibleWaits()}, nil
}

func (p *Provisioner) changed(pv *v1.PersistentVolume) {
	if p.o.Changed != nil {
		p.o.Changed(pv)
	}
}
