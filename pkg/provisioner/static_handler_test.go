package provisioner

import (
	"context"
	"testing"
	"time"

	"github.com/tether-csi/tether/pkg/provisioner/static"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/util/workqueue"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// TestStaticReclaimerQueuesTheDriversStaticVolumes: the reclaimer's informer
// handler queues a static PV of the driver that has something to do, and
// nothing else (a provisioned PV is the library's; a Retain PV without
// the finalizer needs nothing).
func TestStaticReclaimerQueuesTheDriversStaticVolumes(t *testing.T) {
	e := newEnv(t)
	factory := informers.NewSharedInformerFactory(e.client, 0)
	volumes := factory.Core().V1().PersistentVolumes().Informer()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	s, err := static.New(static.Options{Client: e.client, Driver: driverNm, Deleter: e.p, Volumes: volumes, Queue: queue})
	if err != nil || s == nil {
		t.Fatalf("static.New: %v, %v", s, err)
	}
	provisioned := staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeBound)
	provisioned.Name = "provisioned"
	provisioned.Annotations = map[string]string{storagehelpers.AnnDynamicallyProvisioned: driverNm}
	kept := staticPV(v1.PersistentVolumeReclaimRetain, v1.VolumeBound)
	kept.Name = "kept"
	for _, pv := range []*v1.PersistentVolume{provisioned, kept, staticPV(v1.PersistentVolumeReclaimDelete, v1.VolumeBound)} {
		e.savePV(pv)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel() // before Shutdown, which waits for the informer to stop
	factory.WaitForCacheSync(ctx.Done())
	if err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return queue.Len() > 0, nil
	}); err != nil {
		t.Fatalf("no PV queued: %v", err)
	}
	if name, _ := queue.Get(); name != "static-1" || queue.Len() != 0 {
		t.Errorf("queued %q (and %d more), want static-1 alone", name, queue.Len())
	}
}
