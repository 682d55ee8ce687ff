package provisioner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/migration"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// The reads that gather a request's inputs (the class in its CSI form,
// the data source, the VolumeAttributesClass, secrets, topology), for a
// claim's first CreateVolume and for the clean-up's repeat of it; the
// translation itself is package request's.

// csiClass returns the CSI form of a claim's class: the class itself, or,
// for a class of the in-tree plugin this driver takes over, the class with
// its parameters translated (migrated is then true).
func (p *Provisioner) csiClass(ctx context.Context, class *storagev1.StorageClass) (*storagev1.StorageClass, bool, error) {
	if p.o.MigratedFrom == "" || class.Provisioner != p.o.MigratedFrom {
		return class, false, nil
	}
	csiClass, err := migration.TranslateClass(klog.FromContext(ctx), class)
	if err != nil {
		return nil, false, fmt.Errorf("translating the in-tree class %s for %s: %w", class.Name, p.o.Driver.DriverName(), err)
	}
	return csiClass, true, nil
}

// csiVolume returns the CSI form of a PV: the PV itself, or, for an in-tree
// PV migrated to this driver (pv.kubernetes.io/migrated-to), its
// translation.
func (p *Provisioner) csiVolume(ctx context.Context, pv *v1.PersistentVolume) (*v1.PersistentVolume, error) {
	if pv.Spec.CSI != nil || p.o.MigratedFrom == "" || pv.Annotations[storagehelpers.AnnMigratedTo] != p.o.Driver.DriverName() {
		return pv, nil
	}
	out, err := migration.ToCSI(klog.FromContext(ctx), pv)
	if err != nil {
		return nil, fmt.Errorf("translating the in-tree volume %s for %s: %w", pv.Name, p.o.Driver.DriverName(), err)
	}
	return out, nil
}

// mutableParameters reads the claim's VolumeAttributesClass, if it names
// one. A class that does not exist (yet) is an error, which the library
// retries with backoff, as external-provisioner does. The clean-up of a
// deleted claim goes on without a class that is gone: it only has to find
// the volume again.
func (p *Provisioner) mutableParameters(ctx context.Context, claim *v1.PersistentVolumeClaim, cleanUp bool) (map[string]string, error) {
	name := ptr.Deref(claim.Spec.VolumeAttributesClassName, "")
	if name == "" {
		return nil, nil
	}
	if p.o.VolumeAttributesClasses == nil {
		return nil, fmt.Errorf("the claim names the VolumeAttributesClass %s, and this provisioner does not read those", name)
	}
	vac, err := p.o.VolumeAttributesClasses.Get(name)
	if cleanUp && apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Info("The claim's VolumeAttributesClass is gone; repeating CreateVolume without its parameters",
			"pvc", klog.KObj(claim), "volumeAttributesClass", name)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the VolumeAttributesClass %s: %w", name, err)
	}
	params, err := request.MutableParameters(vac, p.o.Driver.DriverName())
	if cleanUp && err != nil {
		klog.FromContext(ctx).Info("Repeating CreateVolume without the VolumeAttributesClass's parameters", "pvc", klog.KObj(claim), "err", err)
		return nil, nil
	}
	return params, err
}

// topologyRequirement gathers the segments the requirement is built from.
func (p *Provisioner) topologyRequirement(claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass, node *v1.Node) (*csi.TopologyRequirement, error) {
	in := request.TopologyInput{Allowed: class.AllowedTopologies, ClaimName: claim.Name,
		Strict: p.o.StrictTopology, Immediate: p.o.ImmediateTopology}
	driver := p.o.Driver.DriverName()
	// nodeKeys: the selected node's registered keys (nil without one).
	var nodeKeys []string
	if node != nil {
		// A node that is gone, or that cannot run the driver, cannot take
		// the volume: the scheduler must pick again (SelectedNodes lets
		// the library hand us a node that is gone).
		if _, err := p.o.Nodes.Get(node.Name); apierrors.IsNotFound(err) {
			return nil, &rescheduleError{fmt.Errorf("the selected node %s is gone", node.Name)}
		}
		cn, err := p.o.CSINodes.Get(node.Name)
		if apierrors.IsNotFound(err) {
			return nil, &rescheduleError{fmt.Errorf("the selected node %s has no CSINode", node.Name)}
		} else if err != nil {
			return nil, fmt.Errorf("CSINode of the selected node %s: %w", node.Name, err)
		}
		keys, ok := driverKeys(cn, driver)
		if !ok {
			return nil, &rescheduleError{fmt.Errorf("the driver %s is not registered on the selected node %s", driver, node.Name)}
		}
		nodeKeys = append([]string{}, keys...)
		if in.Node, err = request.NodeSegment(node, keys); err != nil {
			return nil, err
		}
		if in.Strict {
			return request.Requirement(in)
		}
	} else if !in.Immediate && len(in.Allowed) == 0 {
		return nil, nil
	}
	csiNodes, err := p.o.CSINodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var registered []request.RegisteredNode
	for _, cn := range csiNodes {
		keys, ok := driverKeys(cn, driver)
		if !ok || len(keys) == 0 {
			continue
		}
		n, err := p.o.Nodes.Get(cn.Name)
		if err != nil {
			continue // a node being removed
		}
		registered = append(registered, request.RegisteredNode{Name: n.Name, Keys: keys, Labels: n.Labels})
	}
	// As EP v6.4.0: a selected node's key set alone, else every key set
	// registered, each from the nodes that registered it.
	var keySets [][]string
	in.Cluster, keySets = request.ClusterSegments(registered, nodeKeys)
	if node == nil && len(in.Allowed) == 0 && len(keySets) > 0 && len(in.Cluster) == 0 {
		// As EP: the driver registered topology keys, and no node has
		// them as labels: no requirement would let the volume land on a
		// node that cannot reach it.
		return nil, fmt.Errorf("the topology keys %v the driver registered are on no node's labels", keySets)
	}
	return request.Requirement(in)
}

// driverKeys are the topology keys a CSINode registers for the driver;
// false when the driver is not on it.
func driverKeys(cn *storagev1.CSINode, driver string) ([]string, bool) {
	i := slices.IndexFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
	if i < 0 {
		return nil, false
	}
	return cn.Spec.Drivers[i].TopologyKeys, true
}

// prepared is everything read and checked before CreateVolume.
type prepared struct {
	req        *csi.CreateVolumeRequest
	params     request.ClassParams
	secretRefs map[request.SecretKind]*v1.SecretReference
	// source is the checked data source, nil for none (and in a clean-up).
	source *dataSource
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
	var src *dataSource
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
		if secrets, err = p.readSecret(ctx, ref); err != nil {
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
		if topology, err = p.topologyRequirement(claim, class, node); err != nil {
			return nil, err
		}
	}
	out.source = src
	out.req, err = request.Build(request.Input{Claim: claim, Class: class, Params: params, Secrets: secrets,
		Topology: topology, Source: content, Name: name, Mutable: mutable}, p.o.Request)
	return out, err
}

func (p *Provisioner) readSecret(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
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

// cloneSource checks the source claim of a clone (name, in the clone's
// namespace; see contentSource).
func (p *Provisioner) cloneSource(ctx context.Context, claim *v1.PersistentVolumeClaim, name string, cleanUp bool) (*csi.VolumeContentSource, *v1.PersistentVolumeClaim, error) {
	if !p.o.Clone && !cleanUp {
		return nil, nil, fmt.Errorf("the driver %s cannot clone volumes (no CLONE_VOLUME capability)", p.o.Driver.DriverName())
	}
	src, err := p.o.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("clone source claim %s: %w", name, err)
	}
	switch {
	case src.DeletionTimestamp != nil && !cleanUp:
		// (A clean-up takes it: the cloning protection keeps it for that.)
		return nil, nil, fmt.Errorf("clone source claim %s is being deleted", name)
	case src.Status.Phase != v1.ClaimBound || src.Spec.VolumeName == "":
		return nil, nil, fmt.Errorf("clone source claim %s is not bound", name)
	case storagehelpers.GetPersistentVolumeClaimClass(src) != storagehelpers.GetPersistentVolumeClaimClass(claim):
		return nil, nil, fmt.Errorf("clone source claim %s has another storage class", name)
	}
	want, have := claim.Spec.Resources.Requests[v1.ResourceStorage], src.Spec.Resources.Requests[v1.ResourceStorage]
	if want.Cmp(have) < 0 {
		return nil, nil, fmt.Errorf("the clone requests %s, less than its source's %s", want.String(), have.String())
	}
	pv, err := p.o.Client.CoreV1().PersistentVolumes().Get(ctx, src.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("clone source volume %s: %w", src.Spec.VolumeName, err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != p.o.Driver.DriverName() {
		return nil, nil, fmt.Errorf("clone source volume %s does not belong to the driver %s", pv.Name, p.o.Driver.DriverName())
	}
	if err := request.CheckCloneVolumeMode(claim.Spec.VolumeMode, pv.Spec.VolumeMode); err != nil {
		return nil, nil, fmt.Errorf("clone source claim %s: %w", name, err)
	}
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: pv.Spec.CSI.VolumeHandle}}}, src, nil
}

// Restores from a VolumeSnapshot, as external-provisioner v6.4.0 does them:
// the snapshot must be ready, bound to a VolumeSnapshotContent of this
// driver that points back at it, with a restore size no larger than the
// request; a change of volume mode needs the content's
// request.AnnAllowVolumeModeChange while --prevent-volume-mode-conversion is on.
// Provision puts protect.FinalizerSnapshotSource on the snapshot before
// CreateVolume and protect.SnapshotProtection takes it off once no restore
// from it is in progress, so that the clean-up of a deleted claim finds it
// again.

// dataSource is a claim's checked content source, with the object to protect.
type dataSource struct {
	content  *csi.VolumeContentSource
	claim    *v1.PersistentVolumeClaim // a clone's source claim
	snapshot *snapv1.VolumeSnapshot    // a restore's snapshot
}

func (s *dataSource) volumeContentSource() *csi.VolumeContentSource {
	if s == nil {
		return nil
	}
	return s.content
}

// contentSource reads and checks a claim's data source. A kind that is
// neither a claim nor a VolumeSnapshot is left to a volume populator: an
// IgnoredError, which the library neither retries nor reports.
func (p *Provisioner) contentSource(ctx context.Context, claim *v1.PersistentVolumeClaim, cleanUp bool) (*dataSource, error) {
	ds, err := request.DataSourceOf(claim)
	if err != nil {
		return nil, err
	}
	switch ds.Kind {
	case request.NoSource:
		return nil, nil
	case request.CloneSource:
		content, src, err := p.cloneSource(ctx, claim, ds.Name, cleanUp)
		if err != nil {
			return nil, err
		}
		return &dataSource{content: content, claim: src}, nil
	case request.SnapshotSource:
		return p.snapshotSource(ctx, claim, ds.Name, cleanUp)
	}
	return nil, &controller.IgnoredError{Reason: fmt.Sprintf("the data source %s %q (group %q) is left to a volume populator", ds.TypeKind, ds.Name, ds.Group)}
}

// snapshotSource reads a restore's snapshot and content (from the API
// server: a cache may not show a fresh ready state or deletion) and checks
// them.
func (p *Provisioner) snapshotSource(ctx context.Context, claim *v1.PersistentVolumeClaim, name string, cleanUp bool) (*dataSource, error) {
	if !p.o.Snapshots {
		return nil, fmt.Errorf("the driver %s cannot restore snapshots (no CREATE_DELETE_SNAPSHOT capability)", p.o.Driver.DriverName())
	}
	if p.o.SnapshotClient == nil {
		return nil, errors.New("the VolumeSnapshot API (snapshot.storage.k8s.io/v1) is not installed in this cluster; restart the provisioner once it is")
	}
	snap, err := p.o.SnapshotClient.SnapshotV1().VolumeSnapshots(claim.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", name, err)
	}
	var content *snapv1.VolumeSnapshotContent
	if snap.Status != nil && ptr.Deref(snap.Status.BoundVolumeSnapshotContentName, "") != "" {
		content, err = p.o.SnapshotClient.SnapshotV1().VolumeSnapshotContents().Get(ctx, *snap.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("snapshot %s: its VolumeSnapshotContent: %w", name, err)
		}
	}
	cs, err := request.CheckSnapshotSource(request.SnapshotInput{Claim: claim, Snapshot: snap, Content: content, Driver: p.o.Driver.DriverName(),
		PreventVolumeModeConversion: p.o.PreventVolumeModeConversion, Started: restoreStarted(claim, snap), CleanUp: cleanUp})
	if err != nil {
		return nil, err
	}
	return &dataSource{content: cs, snapshot: snap}, nil
}

// restoreStarted reports whether a claim's restore from snap started
// already: the claim holds the in-flight record and the snapshot still
// carries protect.FinalizerSnapshotSource.
func restoreStarted(claim *v1.PersistentVolumeClaim, snap *snapv1.VolumeSnapshot) bool {
	return inflight.Holds(claim) && slices.Contains(snap.Finalizers, protect.FinalizerSnapshotSource)
}
