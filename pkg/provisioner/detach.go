package provisioner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
)

// The wait for detach before DeleteVolume. As in external-provisioner, it
// is only for a driver with PUBLISH_UNPUBLISH_VOLUME: its volumes are
// attached by ControllerPublishVolume, and one is deleted only once no
// VolumeAttachment names its PV. For any other driver a VolumeAttachment
// is the attach/detach controller's bookkeeping (a CSIDriver that leaves
// attachRequired at its default), which the driver never acts on, and
// EP v6.3.0 does not look at it.
//
// The wait is normal (a workload and its claim deleted together), so it
// makes a Normal event on the PV, as external-provisioner v6.4.0 does, at
// its start and then at most every detachEventEvery, never the library's
// Warning VolumeFailedDelete. The library (v8) knows no "in use" error:
// Delete answers it an IgnoredError, and the deletion of the
// VolumeAttachment hands the PV back to the library (DetachOptions.Requeue).

// ReasonVolumeDelete is the reason of the Normal event on a PV whose
// deletion waits for its volume's detach (external-provisioner v6.4.0's).
const ReasonVolumeDelete = "VolumeDelete"

// detachEventEvery: a wait that lasts is told again at most this often.
const detachEventEvery = 5 * time.Minute

// detachInput is what the wait is decided on.
type detachInput struct {
	// PublishUnpublish: the driver has PUBLISH_UNPUBLISH_VOLUME.
	PublishUnpublish bool
	// PV is the PV's name; Attachments are the VolumeAttachments known,
	// of any PV.
	PV          string
	Attachments []*storagev1.VolumeAttachment
	// LastEvent is when this wait was last told in an event (zero: not
	// yet).
	LastEvent, Now time.Time
}

// detachStep is the decision.
type detachStep struct {
	// Wait: DeleteVolume must wait; Attachment is the first (by name)
	// VolumeAttachment that names the PV, on Node.
	Wait             bool
	Attachment, Node string
	// Event: tell the wait in a Normal event now.
	Event bool
}

// decideDetach says whether a PV's DeleteVolume waits for a detach, and
// whether to tell it now. Pure.
func decideDetach(in detachInput) detachStep {
	if !in.PublishUnpublish {
		return detachStep{}
	}
	var first *storagev1.VolumeAttachment
	for _, va := range in.Attachments {
		if name := va.Spec.Source.PersistentVolumeName; name == nil || *name != in.PV {
			continue
		}
		if first == nil || va.Name < first.Name {
			first = va
		}
	}
	if first == nil {
		return detachStep{}
	}
	tell := in.LastEvent.IsZero() || in.Now.Sub(in.LastEvent) >= detachEventEvery
	return detachStep{Wait: true, Attachment: first.Name, Node: first.Spec.NodeName, Event: tell}
}

// detachWaits are the PVs whose deletion waits for a detach, with when
// each wait was last told (zero: not yet).
type detachWaits struct {
	mu      sync.Mutex
	waiting map[string]time.Time
	o       *DetachOptions
}

// arm marks the PV as waiting, before the VolumeAttachments are read: a
// detach seen after that read finds it marked and hands the PV back. It
// returns when the wait was last told.
func (d *detachWaits) arm(pv string) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.waiting == nil {
		d.waiting = map[string]time.Time{}
	}
	last := d.waiting[pv]
	d.waiting[pv] = last
	return last
}

func (d *detachWaits) told(pv string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.waiting[pv]; ok {
		d.waiting[pv] = at
	}
}

// release ends the PV's wait, and says whether it was waiting.
func (d *detachWaits) release(pv string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.waiting[pv]
	delete(d.waiting, pv)
	return ok
}

func (d *detachWaits) options() *DetachOptions {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.o
}

// DetachOptions wire the wait for detach (see WatchDetach).
type DetachOptions struct {
	// VolumeAttachments is the shared VolumeAttachment informer, whose
	// lister is Options.VolumeAttachments.
	VolumeAttachments cache.SharedIndexInformer
	// Requeue hands a PV back to the library (LibraryVolumes.Requeue).
	Requeue func(pv string)
	// Recorder receives the Normal events of the waits; nil for none.
	Recorder record.EventRecorder
}

// WatchDetach makes a PV whose deletion waited for a detach go back to the
// library as soon as the last VolumeAttachment that held it is deleted.
// Without it, a driver with PUBLISH_UNPUBLISH_VOLUME still waits, but
// through the library's retries (each a Warning event).
func (p *Provisioner) WatchDetach(o DetachOptions) error {
	if o.VolumeAttachments == nil || o.Requeue == nil {
		return errors.New("provisioner: the wait for detach needs the VolumeAttachment informer and a requeue")
	}
	_, err := o.VolumeAttachments.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		va, ok := obj.(*storagev1.VolumeAttachment)
		if !ok || va.Spec.Source.PersistentVolumeName == nil {
			return
		}
		if pv := *va.Spec.Source.PersistentVolumeName; p.detach.release(pv) {
			o.Requeue(pv)
		}
	}})
	if err != nil {
		return err
	}
	p.detach.mu.Lock()
	p.detach.o = &o
	p.detach.mu.Unlock()
	return nil
}

// waitForDetach returns nil when the PV's volume may be deleted now, else
// an IgnoredError after a Normal event (WatchDetach hands the PV back
// later), or, without WatchDetach, a plain error the library retries.
func (p *Provisioner) waitForDetach(ctx context.Context, pv *v1.PersistentVolume) error {
	if !p.o.PublishUnpublish {
		return nil
	}
	last := p.detach.arm(pv.Name)
	vas, err := p.o.VolumeAttachments.List(labels.Everything())
	if err != nil {
		p.detach.release(pv.Name)
		return err
	}
	now := p.now()
	step := decideDetach(detachInput{PublishUnpublish: true, PV: pv.Name, Attachments: vas, LastEvent: last, Now: now})
	if !step.Wait {
		p.detach.release(pv.Name)
		return nil
	}
	msg := fmt.Sprintf("waiting for the volume to be detached from node %s (VolumeAttachment %s) before it is deleted", step.Node, step.Attachment)
	o := p.detach.options()
	if o == nil {
		p.detach.release(pv.Name)
		return errors.New(msg)
	}
	logger := klog.FromContext(ctx)
	if step.Event {
		p.detach.told(pv.Name, now)
		if o.Recorder != nil {
			o.Recorder.Event(pv, v1.EventTypeNormal, ReasonVolumeDelete, strings.ToUpper(msg[:1])+msg[1:])
		}
	}
	logger.V(2).Info("DeleteVolume waits for a detach", "pv", klog.KObj(pv), "node", step.Node, "volumeAttachment", step.Attachment)
	return &controller.IgnoredError{Reason: msg}
}
