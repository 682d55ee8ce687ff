package provisioner

import (
	"sync"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// The wait for detach before DeleteVolume. As in external-provisioner, it
// is only for a driver with PUBLISH_UNPUBLISH_VOLUME: its volumes are
// attached by ControllerPublishVolume, and one is deleted only once no
// VolumeAttachment names its PV. For any other driver a VolumeAttachment
// is the attach/detach controller's bookkeeping (a CSIDriver that leaves
// attachRequired at its default), which the driver never acts on, and
// EP v6.4.0 does not look at it.
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
