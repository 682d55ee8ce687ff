package provisioner

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/inflight"
)

// InFlightOptions configure the in-flight reconciler.
type InFlightOptions struct {
	Claims   cache.SharedIndexInformer
	Volumes  cache.SharedIndexInformer
	Classes  storagelisters.StorageClassLister
	Recorder record.EventRecorder
	// RateLimiter paces retries (--retry-interval-start and -max).
	RateLimiter workqueue.TypedRateLimiter[string]
}

// InFlight settles the claims that carry FinalizerInFlight: once a claim's
// PV is saved, the record goes; once a claim is deleted before its PV was
// saved, the volume that may exist is found again by name (CreateVolume is
// idempotent), deleted, and then the record goes. This closes
// external-provisioner's leak when it restarts mid-CreateVolume (EP#486)
// and its create/delete race (EP#1469).
type InFlight struct {
	p        *Provisioner
	o        InFlightOptions
	queue    workqueue.TypedRateLimitingInterface[string]
	handBack bool
}

// NewInFlight wires the reconciler to the informers.
func (p *Provisioner) NewInFlight(o InFlightOptions) (*InFlight, error) {
	r := &InFlight{p: p, o: o, queue: workqueue.NewTypedRateLimitingQueueWithConfig(o.RateLimiter,
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "in-flight"})}
	onClaim := func(obj any) {
		if c, ok := obj.(*v1.PersistentVolumeClaim); ok && slices.Contains(c.Finalizers, FinalizerInFlight) {
			r.queue.Add(c.Namespace + "/" + c.Name)
		}
	}
	if _, err := o.Claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onClaim, UpdateFunc: func(_, obj any) { onClaim(obj) },
	}); err != nil {
		return nil, err
	}
	onVolume := func(obj any) {
		if pv, ok := obj.(*v1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
			r.queue.Add(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
		}
	}
	if _, err := o.Volumes.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onVolume}); err != nil {
		return nil, err
	}
	return r, nil
}

// Run works the queue until ctx ends.
func (r *InFlight) Run(ctx context.Context, workers int) {
	runQueue(ctx, r.queue, workers, "pvc", "Settling an in-flight volume; will retry", r.sync)
}

// busyRetry is how soon a claim whose lock is held (a CreateVolume in
// progress) is looked at again.
const busyRetry = 2 * time.Second

func (r *InFlight) sync(ctx context.Context, key string) error {
	obj, exists, err := r.o.Claims.GetStore().GetByKey(key)
	if err != nil || !exists {
		return err
	}
	claim := obj.(*v1.PersistentVolumeClaim)
	p := r.p
	if !inflight.Holds(claim) {
		return nil
	}
	if driver, _, ok := inflight.Volume(claim); ok && driver != p.o.Driver.DriverName() {
		return nil // another driver's record
	}
	unlock, ok := p.locks.tryLock(string(claim.UID))
	if !ok {
		r.queue.AddAfter(key, busyRetry)
		return nil
	}
	defer unlock()
	logger := klog.FromContext(ctx).WithValues("pvc", klog.KObj(claim))
	ctx = klog.NewContext(ctx, logger)
	in := settleInput{Claim: claim, Volume: p.recordedVolume(claim), Owns: p.ownsVolumeOf(claim),
		HandedOff: p.handoffs.get(claim.UID), Now: p.now(), HandBack: r.handBack}
	if in.PV, err = r.volumeNamed(ctx, in.Volume, claim); err != nil {
		return err
	}
	if claim.DeletionTimestamp != nil && in.PV == nil && !in.Owns {
		if in.NodeGone, err = r.nodeGone(ctx, claim); err != nil {
			return err
		}
	}
	step := decideSettle(in)
	switch step.Op {
	case settleKeep:
		return nil
	case settleWaitFor:
		r.queue.AddAfter(key, step.Wait)
		return nil
	case settleElsewhere:
		r.o.Recorder.Eventf(claim, v1.EventTypeNormal, "VolumeInFlightKept",
			"the claim is bound to %s; its own volume %s, if the driver made it, stays tracked by the in-flight record and is deleted with the claim", claim.Spec.VolumeName, in.Volume)
		return nil
	case settleNodeGone:
		node := claim.Annotations[storagehelpers.AnnSelectedNode]
		r.o.Recorder.Eventf(claim, v1.EventTypeWarning, "VolumeInFlightNodeGone",
			"the selected node %s is deleted: its local volume %s went with it; dropping the in-flight record", node, in.Volume)
		logger.Info("Dropping the in-flight record of a claim whose node is gone", "node", node, "volume", in.Volume)
	case settleCleanUp:
		if err := r.deleteUnsaved(ctx, claim, in.Volume); err != nil {
			r.o.Recorder.Event(claim, v1.EventTypeWarning, "ProvisioningCleanupFailed",
				fmt.Sprintf("the claim was deleted before its volume %s was saved, and the volume cannot be confirmed deleted yet: %v", in.Volume, err))
			return err
		}
	}
	if err := p.forgetInFlight(ctx, claim); err != nil {
		return err
	}
	p.handoffs.done(claim.UID)
	return nil
}

// HandBack settles every in-flight record it can, once, for a switch back
// to external-provisioner and KCM's binder, which do not know the record:
// records whose PV is saved go at once, deleted claims' volumes are cleaned
// up, and the claims still waiting for their volume are returned (run it
// again once the upstream pair has provisioned them). Call it with the
// informers synced and nothing else running the reconciler.
func (r *InFlight) HandBack(ctx context.Context) ([]string, error) {
	r.handBack = true
	var left []string
	for _, obj := range r.o.Claims.GetStore().List() {
		claim, ok := obj.(*v1.PersistentVolumeClaim)
		if !ok || !inflight.Holds(claim) {
			continue
		}
		key := claim.Namespace + "/" + claim.Name
		if err := r.sync(ctx, key); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		if fresh, err := r.p.o.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{}); err == nil &&
			fresh.UID == claim.UID && inflight.Holds(fresh) {
			left = append(left, key)
		}
	}
	return left, nil
}

// volumeNamed returns the PV of a name, whatever its claim, or nil. When
// the cache has none, the API server is asked only for a claim being
// deleted, where "no PV" may lead to deleting the volume; otherwise the
// PV's arrival in the cache queues the claim again.
func (r *InFlight) volumeNamed(ctx context.Context, name string, claim *v1.PersistentVolumeClaim) (*v1.PersistentVolume, error) {
	obj, exists, err := r.o.Volumes.GetStore().GetByKey(name)
	if err != nil {
		return nil, err
	}
	if exists {
		return obj.(*v1.PersistentVolume), nil
	}
	if claim.DeletionTimestamp == nil {
		return nil, nil
	}
	pv, err := r.p.o.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return pv, err
}

// nodeGone reports whether a claim's selected node is deleted, on the API
// server's word (a cache may not know a new node yet).
func (r *InFlight) nodeGone(ctx context.Context, claim *v1.PersistentVolumeClaim) (bool, error) {
	name := claim.Annotations[storagehelpers.AnnSelectedNode]
	if name == "" {
		return false, nil
	}
	if _, err := r.p.o.Nodes.Get(name); err == nil {
		return false, nil
	}
	_, err := r.p.o.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// deleteUnsaved finds the volume of a deleted claim again by repeating its
// CreateVolume, and deletes it. A final CreateVolume error means the driver
// has no such volume.
func (r *InFlight) deleteUnsaved(ctx context.Context, claim *v1.PersistentVolumeClaim, name string) error {
	className := storagehelpers.GetPersistentVolumeClaimClass(claim)
	class, err := r.o.Classes.Get(className)
	if err != nil {
		return fmt.Errorf("its StorageClass %q is needed to find the volume: %w", className, err)
	}
	var node *v1.Node
	if nodeName := claim.Annotations[storagehelpers.AnnSelectedNode]; nodeName != "" {
		node, _ = r.p.o.Nodes.Get(nodeName)
	}
	prep, err := r.p.prepare(ctx, prepareInput{Claim: claim, Class: class, Node: node, Name: name, CleanUp: true})
	if err != nil {
		return err
	}
	resp, err := r.p.o.Driver.CreateVolume(ctx, prep.req)
	if err != nil {
		if volumeAbsent(err) {
			klog.FromContext(ctx).Info("The driver has no volume for the deleted claim", "volume", name, "err", err)
			return nil
		}
		return err
	}
	handle := resp.GetVolume().GetVolumeId()
	if pv := r.volumeWithHandle(handle); pv != nil {
		klog.FromContext(ctx).Info("A PV tracks the deleted claim's volume: keeping it", "volume", name, "handle", handle, "pv", klog.KObj(pv))
		return nil
	}
	_, err = r.p.o.Driver.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: handle, Secrets: prep.req.Secrets})
	return err
}

// volumeWithHandle returns a cached PV of this driver with the volume
// handle, or nil. It scans the cache: it runs only for deleted claims
// whose PV was never saved, which are rare.
func (r *InFlight) volumeWithHandle(handle string) *v1.PersistentVolume {
	driver := r.p.o.Driver.DriverName()
	for _, obj := range r.o.Volumes.GetStore().List() {
		if pv, ok := obj.(*v1.PersistentVolume); ok && pv.Spec.CSI != nil && pv.Spec.CSI.Driver == driver && pv.Spec.CSI.VolumeHandle == handle {
			return pv
		}
	}
	return nil
}

// ownsVolumeOf reports whether this provisioner's driver holds a claim's
// in-flight volume: always, except in node-deployment mode, where only the
// provisioner of the claim's selected node does. (Found by the chaos run:
// another node's driver answered "not here", which was taken for "no
// volume", and the volume on the right node leaked.)
func (p *Provisioner) ownsVolumeOf(claim *v1.PersistentVolumeClaim) bool {
	return p.o.Node == nil || claim.Annotations[storagehelpers.AnnSelectedNode] == p.o.Node.NodeName
}

// volumeAbsent reports whether a repeated CreateVolume's error proves that
// no volume of that name exists: a final error does, except AlreadyExists,
// which says that one does (with other parameters).
func volumeAbsent(err error) bool {
	return Classify(err, false) == Final && status.Code(err) != codes.AlreadyExists
}
