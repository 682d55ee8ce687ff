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
	p     *Provisioner
	o     InFlightOptions
	queue workqueue.TypedRateLimitingInterface[string]
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
	defer r.queue.ShutDown()
	for range workers {
		go func() {
			for {
				key, quit := r.queue.Get()
				if quit {
					return
				}
				if err := r.sync(ctx, key); err != nil {
					klog.FromContext(ctx).Error(err, "Settling an in-flight volume; will retry", "pvc", key)
					r.queue.AddRateLimited(key)
				} else {
					r.queue.Forget(key)
				}
				r.queue.Done(key)
			}
		}()
	}
	<-ctx.Done()
}

func (r *InFlight) sync(ctx context.Context, key string) error {
	obj, exists, err := r.o.Claims.GetStore().GetByKey(key)
	if err != nil || !exists {
		return err
	}
	claim := obj.(*v1.PersistentVolumeClaim)
	if !slices.Contains(claim.Finalizers, FinalizerInFlight) {
		return nil
	}
	p := r.p
	defer p.locks.lock(string(claim.UID))()
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("pvc", klog.KObj(claim)))
	name := VolumeName(p.o.Request.VolumeNamePrefix, string(claim.UID), p.o.Request.VolumeNameUUIDLen)
	pv, err := r.savedPV(ctx, name, claim)
	if err != nil {
		return err
	}
	if pv != nil {
		if wait := settleWait(claim, pv, time.Now()); wait > 0 {
			r.queue.AddAfter(key, wait)
			return nil
		}
		return p.forgetInFlight(ctx, claim)
	}
	if claim.DeletionTimestamp == nil {
		return nil // still being provisioned: the library retries it
	}
	if !p.ownsVolumeOf(claim) {
		return nil // the volume is on another node: that node's provisioner cleans it up
	}
	if err := r.deleteUnsaved(ctx, claim, name); err != nil {
		r.o.Recorder.Event(claim, v1.EventTypeWarning, "ProvisioningCleanupFailed",
			fmt.Sprintf("the claim was deleted before its volume %s was saved, and the volume cannot be confirmed deleted yet: %v", name, err))
		return err
	}
	klog.FromContext(ctx).Info("Deleted the volume of a claim deleted before its PV was saved", "volume", name)
	return p.forgetInFlight(ctx, claim)
}

// savedPV returns the claim's PV, or nil when it is not saved. When the
// cache has none, the API server is asked only for a claim being deleted,
// where "not saved" leads to deleting the volume; otherwise the PV's
// arrival in the cache queues the claim again.
func (r *InFlight) savedPV(ctx context.Context, name string, claim *v1.PersistentVolumeClaim) (*v1.PersistentVolume, error) {
	obj, exists, err := r.o.Volumes.GetStore().GetByKey(name)
	if err != nil {
		return nil, err
	}
	pv, _ := obj.(*v1.PersistentVolume)
	if !exists {
		if claim.DeletionTimestamp == nil {
			return nil, nil
		}
		pv, err = r.p.o.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != claim.UID {
		return nil, nil
	}
	return pv, nil
}

// binderGrace is how long after its PV is saved a claim's in-flight record
// is left for the binder, which drops it in the write that binds the claim
// (one write fewer per claim). A binder that does not know the record
// (kube-controller-manager's) binds the claim without dropping it; the
// claim's update then has the reconciler drop it at once.
const binderGrace = 10 * time.Second

// settleWait says how much longer the in-flight record of a claim whose PV
// is saved is left for the binder: zero means drop it now, as the claim is
// bound already, or being deleted, or the grace is over.
func settleWait(claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, now time.Time) time.Duration {
	if claim.Spec.VolumeName != "" || claim.DeletionTimestamp != nil {
		return 0
	}
	return max(0, binderGrace-now.Sub(pv.CreationTimestamp.Time))
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
	prep, err := r.p.prepare(ctx, claim, class, node)
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
	_, err = r.p.o.Driver.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: prep.req.Secrets})
	return err
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
