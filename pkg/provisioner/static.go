package provisioner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tether-csi/tether/pkg/provisioner/worker"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

// FinalizerVolume is the finalizer external-provisioner puts on the PVs
// whose backend volume it deletes.
const FinalizerVolume = storagehelpers.PVDeletionProtectionFinalizer

// staticOp is what the static reclaimer does with a PV.
type staticOp int

const (
	staticNone staticOp = iota
	staticAddFinalizer
	staticRemoveFinalizer
	staticDelete
)

// decideStatic applies the reclaim policy of a statically made CSI PV of
// this driver, as external-provisioner v6 (on its library's v13, with
// HonorPVReclaimPolicy) does and the library v8 that tether runs on does
// not: a Bound PV with Delete gets the deletion finalizer; a Released one
// with Delete has its backend volume deleted, then the PV; Retain and
// Recycle drop the finalizer. PVs that a provisioner made
// (pv.kubernetes.io/provisioned-by) are the library's.
func decideStatic(pv *v1.PersistentVolume, driver string) staticOp {
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driver ||
		metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned) {
		return staticNone
	}
	has := slices.Contains(pv.Finalizers, FinalizerVolume)
	if pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		if has {
			return staticRemoveFinalizer
		}
		return staticNone
	}
	switch {
	case pv.Status.Phase == v1.VolumeReleased && (has || pv.DeletionTimestamp == nil):
		return staticDelete
	case pv.Status.Phase == v1.VolumeBound && !has && pv.DeletionTimestamp == nil:
		return staticAddFinalizer
	}
	return staticNone
}

// StaticOptions configure the reclaimer of static PVs.
type StaticOptions struct {
	Volumes     cache.SharedIndexInformer
	RateLimiter workqueue.TypedRateLimiter[string]
}

// Static applies the reclaim policy of statically made CSI PVs of the
// driver (decideStatic).
type Static struct {
	p     *Provisioner
	o     StaticOptions
	queue workqueue.TypedRateLimitingInterface[string]
}

// NewStatic wires the reclaimer to the PV informer.
func (p *Provisioner) NewStatic(o StaticOptions) (*Static, error) {
	s := &Static{p: p, o: o, queue: workqueue.NewTypedRateLimitingQueueWithConfig(o.RateLimiter,
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "static-volumes"})}
	driver := p.o.Driver.DriverName()
	add := func(obj any) {
		if pv, ok := obj.(*v1.PersistentVolume); ok && decideStatic(pv, driver) != staticNone {
			s.queue.Add(pv.Name)
		}
	}
	if _, err := o.Volumes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) },
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// Run works the queue until ctx ends.
func (s *Static) Run(ctx context.Context, workers int) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName("static-volumes"))
	worker.Run(ctx, s.queue, workers, "pv", "Reclaiming a static volume; will retry", s.sync)
}

func (s *Static) sync(ctx context.Context, name string) error {
	obj, exists, err := s.o.Volumes.GetStore().GetByKey(name)
	if err != nil || !exists {
		return err
	}
	pv := obj.(*v1.PersistentVolume)
	if !s.p.ShouldDelete(ctx, pv) {
		return nil // another node's volume in node-deployment mode
	}
	logger := klog.FromContext(ctx).WithValues("pv", klog.KObj(pv))
	switch decideStatic(pv, s.p.o.Driver.DriverName()) {
	case staticAddFinalizer:
		return s.setFinalizers(ctx, pv, append(slices.Clone(pv.Finalizers), FinalizerVolume))
	case staticRemoveFinalizer:
		return s.dropFinalizer(ctx, pv)
	case staticDelete:
		if err := s.p.Delete(ctx, pv); err != nil {
			return err
		}
		logger.Info("Deleted the backend volume of a released static PV with reclaim policy Delete")
		volumes := s.p.o.Client.CoreV1().PersistentVolumes()
		if err := volumes.Delete(ctx, pv.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &pv.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		fresh, err := volumes.Get(ctx, pv.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && fresh.UID != pv.UID) {
			return nil
		} else if err != nil {
			return err
		}
		return s.dropFinalizer(ctx, fresh)
	}
	return nil
}

func (s *Static) dropFinalizer(ctx context.Context, pv *v1.PersistentVolume) error {
	if !slices.Contains(pv.Finalizers, FinalizerVolume) {
		return nil
	}
	return s.setFinalizers(ctx, pv, slices.DeleteFunc(slices.Clone(pv.Finalizers), func(f string) bool { return f == FinalizerVolume }))
}

// setFinalizers writes a PV's finalizers with a merge patch that carries
// the PV's resourceVersion, so a change meanwhile fails it with a conflict
// (external-provisioner's RBAC grants patch, not update, on PVs).
func (s *Static) setFinalizers(ctx context.Context, pv *v1.PersistentVolume, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": finalizers, "resourceVersion": pv.ResourceVersion}})
	if err != nil {
		return err
	}
	_, err = s.p.o.Client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the finalizers of %s: %w", pv.Name, err)
	}
	return nil
}
