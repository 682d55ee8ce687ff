package provisioner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/migration"
)

// The clean-up of a volume made for a claim and never saved in a PV: the
// claim is deleted, or will never use the volume. The volume's name is
// derived from the claim's UID; the request is built again from the
// claim, its class and, for a clone or a restore, the source the claim
// names, read and checked as for provisioning. Nothing the record's
// annotations say chooses the volume or its source (see docs/design.md,
// "Threat model").

// abandonGrace is how long a deleted claim's clean-up retries an input it
// cannot read (its class, a secret) before it gives the volume up: the
// claim goes, and the volume is reported (abandon).
const abandonGrace = 10 * time.Minute

// abandonError says that a volume cannot be cleaned up, now or later: the
// record goes, and the volume is reported where it outlives the claim.
type abandonError struct{ reason string }

func (e *abandonError) Error() string { return e.reason }

// deleteUnsaved finds a claim's volume again by repeating its CreateVolume
// and deletes it. A final CreateVolume error means the driver has no such
// volume. An *abandonError means the volume cannot be found again.
func (r *InFlight) deleteUnsaved(ctx context.Context, claim *v1.PersistentVolumeClaim, name string) error {
	logger := klog.FromContext(ctx)
	class, err := r.cleanUpClass(claim)
	if err != nil {
		return r.giveUpLater(claim, err)
	}
	var node *v1.Node
	if nodeName := claim.Annotations[storagehelpers.AnnSelectedNode]; nodeName != "" {
		node, _ = r.p.o.Nodes.Get(nodeName)
	}
	if r.p.o.Node != nil {
		// A local volume is found again on this node, whatever node the
		// claim moved to.
		node, _ = r.p.o.Nodes.Get(r.p.o.Node.NodeName)
	}
	prep, err := r.p.prepare(ctx, prepareInput{Claim: claim, Class: class, Node: node, Name: name, CleanUp: true})
	if err != nil {
		if gone, gerr := r.secretNamespaceGone(ctx, err); gerr == nil && gone {
			return &abandonError{reason: fmt.Sprintf("its secret is gone with its namespace: %v", err)}
		}
		return r.giveUpLater(claim, err)
	}
	resp, err := r.p.createVolume(ctx, claim.UID, prep.req)
	if err != nil {
		switch {
		case status.Code(err) == codes.AlreadyExists:
			// A volume of the name exists, made with another request: its
			// handle cannot be learnt from the driver.
			return &abandonError{reason: fmt.Sprintf("the driver has a volume of the name made with other parameters, and does not say its handle: %v", err)}
		case status.Code(err) == codes.ResourceExhausted:
			// Not proof of no volume: an earlier call that timed out may
			// still be making it.
			return r.giveUpLater(claim, err)
		case noVolumeMade(err):
			logger.Info("The driver has no volume of the name", "volume", name, "err", err)
			return nil
		}
		return err
	}
	handle := resp.GetVolume().GetVolumeId()
	// No save of the volume's PV may land once it is deleted: saves of it
	// are refused from now on, and the PVs are read once none is under way.
	if err := r.p.saves.Fence(ctx, name); err != nil {
		return err
	}
	if pv, err := r.volumeWithHandle(ctx, handle); err != nil {
		return err
	} else if pv != nil {
		logger.Info("A PV tracks the volume: keeping it", "volume", name, "handle", handle, "pv", klog.KObj(pv))
		return nil
	}
	_, err = r.p.o.Driver.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: handle, Secrets: prep.req.Secrets})
	if err == nil {
		logger.Info("Deleted the volume made for the claim and never saved", "volume", name, "handle", handle)
	}
	return err
}

// cleanUpClass is the claim's class, which must be of this driver (or of
// the in-tree plugin it takes over): a volume is only ever made for such a
// claim.
func (r *InFlight) cleanUpClass(claim *v1.PersistentVolumeClaim) (*storagev1.StorageClass, error) {
	name := storagehelpers.GetPersistentVolumeClaimClass(claim)
	class, err := r.o.Classes.Get(name)
	if err != nil {
		return nil, fmt.Errorf("its StorageClass %q is needed to find the volume: %w", name, err)
	}
	if class.Provisioner != r.p.o.Driver.DriverName() && (r.p.o.MigratedFrom == "" || class.Provisioner != r.p.o.MigratedFrom) {
		return nil, fmt.Errorf("its StorageClass %q is now of the provisioner %s", name, class.Provisioner)
	}
	class, _, err = r.p.csiClass(context.Background(), class)
	return class, err
}

// giveUpLater returns err while the claim is young, an *abandonError once
// a deleted claim has waited abandonGrace for its clean-up's input: a
// claim is never left Terminating for ever. A living claim keeps trying.
func (r *InFlight) giveUpLater(claim *v1.PersistentVolumeClaim, err error) error {
	if claim.DeletionTimestamp != nil && r.p.now().Sub(claim.DeletionTimestamp.Time) >= abandonGrace {
		return &abandonError{reason: fmt.Sprintf("its input has been unreadable for %s since the claim's deletion: %v", abandonGrace, err)}
	}
	return err
}

// secretNamespaceGone reports whether a prepare error is a secret that is
// missing because its namespace is gone or being deleted: a Terminating
// namespace takes no new object, so it never comes back.
func (r *InFlight) secretNamespaceGone(ctx context.Context, err error) (bool, error) {
	var missing *secretError
	if !errors.As(err, &missing) || !apierrors.IsNotFound(missing.err) {
		return false, nil
	}
	ns, gerr := r.p.o.Client.CoreV1().Namespaces().Get(ctx, missing.ref.Namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(gerr):
		return true, nil
	case gerr != nil:
		return false, gerr // (no RBAC to read namespaces: abandonGrace decides)
	}
	return ns.DeletionTimestamp != nil || ns.Status.Phase == v1.NamespaceTerminating, nil
}

// abandon records a volume that cannot be cleaned up where it outlives the
// claim: a Warning event on the claim's StorageClass (else the CSIDriver),
// the abandoned-volume counter, and the orphan sweep's report list. The
// record then goes, so that the claim and its namespace can go.
func (r *InFlight) abandon(ctx context.Context, claim *v1.PersistentVolumeClaim, name string, why *abandonError) {
	logger := klog.FromContext(ctx)
	whose := fmt.Sprintf("the deleted claim %s (UID %s)", klog.KObj(claim), claim.UID)
	if claim.DeletionTimestamp == nil {
		whose = fmt.Sprintf("the claim %s (UID %s), which will not use it (%s)", klog.KObj(claim), claim.UID, unusedWhy(claim))
	}
	msg := fmt.Sprintf("the volume %s made for %s may exist on the backend and cannot be cleaned up: %s; delete it by hand if it exists",
		name, whose, why.reason)
	logger.Error(nil, "Abandoning the clean-up of a volume", "volume", name, "reason", why.reason)
	r.o.Recorder.Event(claim, v1.EventTypeWarning, ReasonVolumeCleanupAbandoned, msg)
	var on metav1.Object
	if class, err := r.o.Classes.Get(storagehelpers.GetPersistentVolumeClaimClass(claim)); err == nil {
		r.o.Recorder.Event(class, v1.EventTypeWarning, ReasonVolumeCleanupAbandoned, msg)
		on = class
	} else if d, err := r.p.o.Client.StorageV1().CSIDrivers().Get(ctx, r.p.o.Driver.DriverName(), metav1.GetOptions{}); err == nil {
		r.o.Recorder.Event(d, v1.EventTypeWarning, ReasonVolumeCleanupAbandoned, msg)
		on = d
	}
	if on == nil {
		logger.Info("No StorageClass or CSIDriver object to record the abandoned volume on", "volume", name)
	}
	if r.abandoned != nil {
		r.abandoned.Inc()
	}
	if r.o.Abandoned != nil {
		r.o.Abandoned(name, why.reason)
	}
}

// ReasonVolumeCleanupAbandoned is the event reason for a volume whose
// clean-up can never complete.
const ReasonVolumeCleanupAbandoned = "VolumeCleanupAbandoned"

// volumeWithHandle returns a PV of this driver with the volume handle, in
// any form (CSI, or in-tree under CSI migration), or nil. It lists the
// PVs from the API server: it runs only before a clean-up's DeleteVolume,
// which is rare.
func (r *InFlight) volumeWithHandle(ctx context.Context, handle string) (*v1.PersistentVolume, error) {
	pvs, err := r.p.o.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	driver := r.p.o.Driver.DriverName()
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if pv.Spec.CSI == nil && r.p.o.MigratedFrom != "" {
			if translated, err := migration.ToCSI(klog.FromContext(ctx), pv); err == nil {
				pv = translated
			}
		}
		if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == driver && pv.Spec.CSI.VolumeHandle == handle {
			return &pvs.Items[i], nil
		}
	}
	return nil, nil
}

// unusedWhy says why a living claim will not use its own volume.
func unusedWhy(claim *v1.PersistentVolumeClaim) string {
	if claim.Spec.VolumeName != "" {
		return "it is bound to " + claim.Spec.VolumeName
	}
	return "it was rescheduled away from node " + claim.Annotations[inflight.AnnNode]
}
