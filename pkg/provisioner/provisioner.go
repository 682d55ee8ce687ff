package provisioner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/migration"
	"github.com/tether-csi/tether/pkg/nodeloss"
	"github.com/tether-csi/tether/pkg/provisioner/claimlock"
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

	Claims   corelisters.PersistentVolumeClaimLister
	Volumes  corelisters.PersistentVolumeLister
	Classes  storagelisters.StorageClassLister
	Nodes    corelisters.NodeLister
	CSINodes storagelisters.CSINodeLister
	// VolumeAttachments is read only with PublishUnpublish.
	VolumeAttachments storagelisters.VolumeAttachmentLister
	// VolumeAttributesClasses, when nil, makes every claim that names a
	// VolumeAttributesClass fail.
	VolumeAttributesClasses storagelisters.VolumeAttributesClassLister
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
	return &Provisioner{o: o, locks: o.Locks, now: o.Clock, record: &records.Writer{Client: o.Client, Driver: o.Driver.DriverName(), Node: node}, handoffs: newHandoffs(), secretsUsed: newSecretsUsed(), deleted: newDeletedVolumes(),
		answers: newCreateAnswers()}, nil
}

// SupportsBlock lets the driver decide: it refuses block volumes itself.
func (p *Provisioner) SupportsBlock(context.Context) bool { return true }

// ShouldProvision skips claims that are being deleted (the in-flight
// reconciler owns those) and, in node-deployment mode, claims of other nodes.
func (p *Provisioner) ShouldProvision(ctx context.Context, claim *v1.PersistentVolumeClaim) bool {
	if claim.DeletionTimestamp != nil || !p.forDriver(claim) {
		return false
	}
	if p.o.Node != nil {
		return p.nodeShouldProvision(ctx, claim)
	}
	return true
}

// forDriver reports whether a claim is for this driver: its
// storage-provisioner annotation (or the beta one) or, under CSI migration,
// its pv.kubernetes.io/migrated-to names the driver, as in
// external-provisioner. The library asks ShouldProvision before it looks
// at the annotation itself, so without this a node-deployment provisioner
// would try to own other provisioners' claims (and give them a selected
// node).
func (p *Provisioner) forDriver(claim *v1.PersistentVolumeClaim) bool {
	driver := p.o.Driver.DriverName()
	provisioner, ok := claim.Annotations[storagehelpers.AnnStorageProvisioner]
	if !ok {
		provisioner = claim.Annotations[storagehelpers.AnnBetaStorageProvisioner]
	}
	return provisioner == driver || claim.Annotations[storagehelpers.AnnMigratedTo] == driver
}

// ShouldDelete takes only the PVs of this provisioner's driver and, in
// node-deployment mode, only those on its node; never a PV whose claim the
// binder released for node loss (its volume is left to its node's sweep).
func (p *Provisioner) ShouldDelete(ctx context.Context, pv *v1.PersistentVolume) bool {
	if nodeloss.Released(pv) {
		return false
	}
	if pv, err := p.csiVolume(ctx, pv); err != nil || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != p.o.Driver.DriverName() {
		return false
	}
	return p.o.Node == nil || p.onOwnNode(pv)
}

// Provision makes a volume for a claim. Before CreateVolume it records on
// the claim (a finalizer) that a volume may exist for it; the record goes
// once the PV is saved, or once the volume is known not to exist.
func (p *Provisioner) Provision(ctx context.Context, po controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	logger := klog.FromContext(ctx).WithValues("pvc", klog.KObj(po.PVC))
	ctx = klog.NewContext(ctx, logger)
	defer p.locks.Lock(string(po.PVC.UID))()

	// The library's claim may be older than the in-flight reconciler's last
	// step, taken while this call waited for the lock.
	claim, err := p.currentClaim(po.PVC)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	name := request.VolumeName(p.o.Request.VolumeNamePrefix, string(claim.UID), p.o.Request.VolumeNameUUIDLen)
	if err := p.nameFree(name, claim); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	class, migrated, err := p.csiClass(ctx, po.StorageClass)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	po.StorageClass = class
	prep, err := p.prepare(ctx, prepareInput{Claim: claim, Class: po.StorageClass, Node: po.SelectedNode, Name: name})
	if err != nil {
		return nil, prepareState(err), err
	}
	if node := p.recordedElsewhere(claim); node != "" {
		return nil, controller.ProvisioningNoChange, fmt.Errorf("waiting for the provisioner of node %s to clean up the volume it may have made for the claim before it was rescheduled", node)
	}
	fresh := !inflight.Holds(claim)
	if claim, err = p.record.Record(ctx, claim, name); err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	if fresh {
		p.answers.recorded(claim.UID, p.now())
	}
	p.secretsUsed.remember(claim.UID, prep.req.Secrets, p.now())
	if err := p.protect(ctx, prep.source); err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	resp, err := p.createVolume(ctx, claim.UID, prep.req)
	if err != nil {
		_, nodeSelected := claim.Annotations[storagehelpers.AnnSelectedNode]
		// As EP: ResourceExhausted on a selected node reschedules only for a
		// driver that takes topology; for others the node did not matter.
		outcome := Classify(err, nodeSelected && p.o.Topology)
		logger.Info("CreateVolume failed", "volume", name, "outcome", outcome.String(), "nodeSelected", nodeSelected, "err", err)
		// The record stays, whatever the error: this call made nothing, but
		// an earlier one may have (it timed out, then the driver answers
		// AlreadyExists to a changed request, or ResourceExhausted). It goes
		// with the claim's PV, or with the clean-up (at once, without a
		// driver call, when every call answered final: createAnswers).
		if outcome == Reschedule {
			if rerr := p.record.Reschedule(ctx, claim); rerr != nil {
				logger.Error(rerr, "Removing the selected node")
			}
		}
		return nil, outcome.State(), fmt.Errorf("CreateVolume %s: %w", name, err)
	}
	pv, err := request.BuildPV(resp, request.PVInput{
		Name: name, Driver: p.o.Driver.DriverName(), Identity: p.o.Identity, Claim: claim,
		ReclaimPolicy: request.ReclaimPolicy(po.StorageClass), MountOptions: po.StorageClass.MountOptions,
		FSType: fsTypeFor(prep.params, p.o.Request.DefaultFSType), Secrets: prep.secretRefs,
	})
	if err == nil && migrated {
		// As external-provisioner: a migrated claim gets an in-tree PV.
		pv, err = migration.ToInTree(pv)
	}
	if err != nil {
		// A volume exists that we cannot describe: delete it (the in-flight
		// record stays until the driver confirms).
		err = fmt.Errorf("the driver's answer for %s is unusable: %w", name, err)
		if _, derr := p.o.Driver.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: prep.req.Secrets}); derr != nil {
			return nil, controller.ProvisioningInBackground, fmt.Errorf("%w; deleting it failed too: %v", err, derr)
		}
		if rerr := p.record.Drop(ctx, claim); rerr != nil {
			logger.Error(rerr, "Removing the in-flight record")
		}
		return nil, controller.ProvisioningFinished, err
	}
	// The library saves the PV after this returns; the reconciler waits for
	// that save before it takes a deleted claim's volume for unsaved.
	p.handoffs.add(claim.UID, claim.ResourceVersion, p.now())
	logger.V(2).Info("Volume created", "volume", pv.Name, "handle", resp.GetVolume().GetVolumeId())
	p.changed(pv)
	return pv, controller.ProvisioningFinished, nil
}

// currentClaim is the informer's copy of the library's claim, or an
// IgnoredError when the claim is gone, is another claim of the same name,
// is being deleted, or is bound already: no CreateVolume may start for it.
func (p *Provisioner) currentClaim(stale *v1.PersistentVolumeClaim) (*v1.PersistentVolumeClaim, error) {
	claim, err := p.o.Claims.PersistentVolumeClaims(stale.Namespace).Get(stale.Name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &controller.IgnoredError{Reason: "the claim is gone"}
	case err != nil:
		return nil, err
	case claim.UID != stale.UID:
		return nil, &controller.IgnoredError{Reason: "the claim was replaced by another of the same name"}
	case claim.DeletionTimestamp != nil:
		return nil, &controller.IgnoredError{Reason: "the claim is being deleted"}
	case claim.Spec.VolumeName != "":
		return nil, &controller.IgnoredError{Reason: "the claim is bound to " + claim.Spec.VolumeName}
	}
	return claim, nil
}

// nameFree refuses a volume name that a PV of another claim holds (two
// claims whose shortened UIDs collide under --volume-name-uuid-length):
// CreateVolume, idempotent by name, would hand this claim the other's
// volume.
func (p *Provisioner) nameFree(name string, claim *v1.PersistentVolumeClaim) error {
	pv, err := p.o.Volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == claim.UID {
		return &controller.IgnoredError{Reason: "its PV " + name + " is saved already"}
	}
	return fmt.Errorf("the volume name %s is taken by a PV of another claim; use a longer --volume-name-uuid-length", name)
}

func fsTypeFor(params request.ClassParams, defaultFSType string) string {
	if params.FSType != "" {
		return params.FSType
	}
	return defaultFSType
}

// prepared is everything read and checked before CreateVolume.
type prepared struct {
	req        *csi.CreateVolumeRequest
	params     request.ClassParams
	secretRefs map[request.SecretKind]*v1.SecretReference
	// source is the checked data source, nil for none (and in a clean-up).
	source *source
}

// prepareInput is what a request is built for.
type prepareInput struct {
	Claim *v1.PersistentVolumeClaim
	Class *storagev1.StorageClass
	Node  *v1.Node
	// Name is the volume's name.
	Name string
	// CleanUp: the request repeats the CreateVolume of a deleted claim to
	// find its volume; a clone's or restore's source is then taken from the
	// in-flight record, not from the source claim or snapshot, which may be
	// gone.
	CleanUp bool
}

// prepare reads what a request needs and builds it. Its errors are about
// bad input (claim, class, secrets, topology, data source, attributes
// class): no CreateVolume is made. A *rescheduleError means the selected
// node cannot take the volume.
func (p *Provisioner) prepare(ctx context.Context, in prepareInput) (*prepared, error) {
	claim, class, node, name := in.Claim, in.Class, in.Node, in.Name
	var src *source
	var content *csi.VolumeContentSource
	if !in.CleanUp {
		// The data source first: a populator's claim is left alone (as in
		// external-provisioner).
		var err error
		if src, err = p.contentSource(ctx, claim, false); err != nil {
			return nil, err
		}
		content = src.volumeContentSource()
		if err := request.Supported(claim, p.o.ModifyVolume); err != nil {
			return nil, err
		}
	} else {
		// A clean-up must find its volume whatever else changed: its source
		// is read again from what the claim names, checked as for
		// provisioning (so that it can only be the claim's own source), the
		// source's protection keeping it there; without one the request
		// goes without a source, and a driver that wants it answers
		// AlreadyExists.
		if s, err := p.contentSource(ctx, claim, true); err == nil {
			content = s.volumeContentSource()
		} else {
			klog.FromContext(ctx).Info("The clean-up's CreateVolume goes without the claim's data source", "err", err)
		}
		src = nil
	}
	mutable, err := p.mutableParameters(ctx, claim, in.CleanUp)
	if err != nil {
		return nil, err
	}
	params, err := request.ParseClassParams(class.Parameters)
	if err != nil {
		return nil, err
	}
	vars := request.TemplateVars{PVName: name, PVCName: claim.Name, PVCNamespace: claim.Namespace, PVCAnnotations: claim.Annotations}
	out := &prepared{params: params, secretRefs: map[request.SecretKind]*v1.SecretReference{}}
	for kind, tmpl := range params.Secrets {
		ref, err := request.ResolveSecret(tmpl, vars)
		if err != nil {
			return nil, fmt.Errorf("%s secret: %w", kind, err)
		}
		out.secretRefs[kind] = ref
	}
	var secrets map[string]string
	if ref := out.secretRefs[request.ProvisionerSecret]; ref != nil {
		if secrets, err = p.secret(ctx, ref); err != nil {
			known, ok := p.secretsUsed.known(claim.UID)
			if !in.CleanUp || !ok || !apierrors.IsNotFound(err) {
				return nil, err
			}
			// The secret is gone (with its namespace, most often): the
			// clean-up uses what this process's CreateVolume for the claim
			// was given.
			klog.FromContext(ctx).Info("The clean-up uses the provisioner secret its CreateVolume was given", "err", err)
			secrets = known
		}
	}
	var topology *csi.TopologyRequirement
	if p.o.Topology {
		if topology, err = p.topology(claim, class, node); err != nil {
			return nil, err
		}
	}
	out.source = src
	out.req, err = request.Build(request.Input{Claim: claim, Class: class, Params: params, Secrets: secrets,
		Topology: topology, Source: content, Name: name, Mutable: mutable}, p.o.Request)
	return out, err
}

func (p *Provisioner) secret(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	s, err := p.o.Client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, &secretError{ref: ref, err: err}
	}
	return request.SecretData(s), nil
}

// secretError is a secret that could not be read.
type secretError struct {
	ref *v1.SecretReference
	err error
}

func (e *secretError) Error() string {
	return fmt.Sprintf("reading secret %s/%s: %v", e.ref.Namespace, e.ref.Name, e.err)
}
func (e *secretError) Unwrap() error { return e.err }

// rescheduleError is a prepare error after which the scheduler should
// pick another node: Provision returns the library's Reschedule state, and
// the library removes volume.kubernetes.io/selected-node. No CreateVolume
// was made for it.
type rescheduleError struct{ err error }

func (e *rescheduleError) Error() string { return e.err.Error() }
func (e *rescheduleError) Unwrap() error { return e.err }

// prepareState is the library's state after a prepare error.
func prepareState(err error) controller.ProvisioningState {
	if r := (*rescheduleError)(nil); errors.As(err, &r) {
		return controller.ProvisioningReschedule
	}
	return controller.ProvisioningFinished
}

// Delete deletes a Released volume's backend volume; the library then
// removes the PV's finalizer. For a driver with PUBLISH_UNPUBLISH_VOLUME it
// waits while a VolumeAttachment still names the PV (waitForDetach).
func (p *Provisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	pv, err := p.csiVolume(ctx, pv)
	if err != nil {
		return err
	}
	if pv.Spec.CSI == nil {
		return &controller.IgnoredError{Reason: "not a CSI volume"}
	}
	if err := p.stillToDelete(ctx, pv); err != nil {
		return err
	}
	if err := p.waitForDetach(ctx, pv); err != nil {
		return err
	}
	// An empty deletion secret annotation (EP writes them on every PV) is
	// no secret; see request.DeletionSecretRef.
	secrets, err := p.deletionSecrets(ctx, pv)
	if err != nil {
		return err
	}
	if _, err := p.o.Driver.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle, Secrets: secrets}); err != nil {
		return fmt.Errorf("DeleteVolume %s: %w", pv.Spec.CSI.VolumeHandle, err)
	}
	// The library removes the PV's deletion finalizer next: a conflict
	// there is retried alone (LibraryClient), not with this DeleteVolume.
	p.deleted.add(pv.UID, struct{}{}, p.now())
	klog.FromContext(ctx).V(2).Info("Volume deleted", "pv", klog.KObj(pv), "handle", pv.Spec.CSI.VolumeHandle)
	p.changed(pv)
	return nil
}

// stillToDelete checks on the API server's copy of a PV that its volume
// is still to be deleted: the library decides on its cache, and an admin
// may have patched the PV to Retain since, to keep the disk. An
// IgnoredError makes the library leave the PV alone.
func (p *Provisioner) stillToDelete(ctx context.Context, pv *v1.PersistentVolume) error {
	fresh, err := p.o.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return &controller.IgnoredError{Reason: "the PV is gone"}
	case err != nil:
		return err
	case pv.UID != "" && fresh.UID != pv.UID:
		return &controller.IgnoredError{Reason: "the PV was replaced by another of the same name"}
	case fresh.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete:
		return &controller.IgnoredError{Reason: "the PV's reclaim policy is now " + string(fresh.Spec.PersistentVolumeReclaimPolicy)}
	case nodeloss.Released(fresh):
		return &controller.IgnoredError{Reason: "the binder released its claim for node loss: no DeleteVolume, the volume is left to its node's orphan sweep"}
	}
	return nil
}

func (p *Provisioner) changed(pv *v1.PersistentVolume) {
	if p.o.Changed != nil {
		p.o.Changed(pv)
	}
}
