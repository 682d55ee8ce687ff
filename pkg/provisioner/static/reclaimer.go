package static

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/tether-csi/tether/pkg/provisioner/worker"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Deleter deletes a released PV's backend volume: the Provisioner. Answers
// says whether the PV is this provisioner's to reclaim (in node-deployment
// mode its node's), and errs while it cannot tell yet (its node not in the
// cache): the PV is then looked at again, not dropped.
type Deleter interface {
	Answers(ctx context.Context, pv *v1.PersistentVolume) (bool, error)
	Delete(ctx context.Context, pv *v1.PersistentVolume) error
}

// Options configure the reclaimer of static PVs.
type Options struct {
	Client  kubernetes.Interface
	Driver  string
	Deleter Deleter
	Volumes cache.SharedIndexInformer
	// RateLimiter paces retries; Queue, if set, is the work queue of PV
	// names instead of one made with it.
	RateLimiter workqueue.TypedRateLimiter[string]
	Queue       workqueue.TypedRateLimitingInterface[string]
}

// Reclaimer applies the reclaim policy of statically made CSI PVs of the
// driver (Decide). It is the one writer of those PVs: their deletion
// finalizer, and their deletion once the volume is gone.
type Reclaimer struct {
	o     Options
	queue workqueue.TypedRateLimitingInterface[string]
}

// New wires the reclaimer to the PV informer.
func New(o Options) (*Reclaimer, error) {
	if o.Client == nil || o.Deleter == nil || o.Volumes == nil || o.Driver == "" {
		return nil, errors.New("static: a client, a deleter, the PV informer and the driver's name are required")
	}
	queue := o.Queue
	if queue == nil {
		queue = workqueue.NewTypedRateLimitingQueueWithConfig(o.RateLimiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "static-volumes"})
	}
	s := &Reclaimer{o: o, queue: queue}
	driver := o.Driver
	add := func(obj any) {
		if pv, ok := obj.(*v1.PersistentVolume); ok && Decide(pv, driver) != None {
			s.queue.Add(pv.Name)
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}
	if _, err := o.Volumes.AddEventHandler(handler); err != nil {
		return nil, err
	}
	return s, nil
}

// Run works the queue until ctx ends.
func (s *Reclaimer) Run(ctx context.Context, workers int) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName("static-volumes"))
	worker.Run(ctx, s.queue, workers, "pv", "Reclaiming a static volume; will retry", s.Reconcile)
}

// Reconcile applies the reclaim policy of one PV (by name): one worker
// step, which Run's workers call for each key of the queue.
func (s *Reclaimer) Reconcile(ctx context.Context, name string) error {
	obj, exists, err := s.o.Volumes.GetStore().GetByKey(name)
	if err != nil || !exists {
		return err
	}
	pv := obj.(*v1.PersistentVolume)
	if Decide(pv, s.o.Driver) == None {
		return nil
	}
	if ours, err := s.o.Deleter.Answers(ctx, pv); err != nil || !ours {
		return err // another node's volume in node-deployment mode, or not known yet
	}
	logger := klog.FromContext(ctx).WithValues("pv", klog.KObj(pv))
	switch Decide(pv, s.o.Driver) {
	case AddFinalizer:
		return s.setFinalizers(ctx, pv, append(slices.Clone(pv.Finalizers), finalizer))
	case RemoveFinalizer:
		return s.dropFinalizer(ctx, pv)
	case Delete:
		if err := s.o.Deleter.Delete(ctx, pv); err != nil {
			return err
		}
		logger.Info("Deleted the backend volume of a released static PV with reclaim policy Delete")
		volumes := s.o.Client.CoreV1().PersistentVolumes()
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

func (s *Reclaimer) dropFinalizer(ctx context.Context, pv *v1.PersistentVolume) error {
	if !slices.Contains(pv.Finalizers, finalizer) {
		return nil
	}
	return s.setFinalizers(ctx, pv, slices.DeleteFunc(slices.Clone(pv.Finalizers), func(f string) bool { return f == finalizer }))
}

// setFinalizers writes a PV's finalizers with a merge patch that carries
// the PV's resourceVersion, so a change meanwhile fails it with a conflict
// (external-provisioner's RBAC grants patch, not update, on PVs).
func (s *Reclaimer) setFinalizers(ctx context.Context, pv *v1.PersistentVolume, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": finalizers, "resourceVersion": pv.ResourceVersion}})
	if err != nil {
		return err
	}
	_, err = s.o.Client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the finalizers of %s: %w", pv.Name, err)
	}
	return nil
}
