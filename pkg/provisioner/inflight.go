package provisioner

import (
	v1 "k8s.io/api/core/v1"

	"github.com/tether-csi/tether/pkg/inflight"
)

// FinalizerInFlight on a claim records durably that a backend volume may
// exist for it and no PV tracks it yet (see package inflight). It is added
// before the first CreateVolume and removed once the PV is saved (by the
// binder, in its bind write, or by the InFlight reconciler), or once the
// volume is known not to exist or is deleted (the clean-up of a claim that
// is deleted or will never use it). A failed CreateVolume leaves it: an
// earlier call may have made the volume. While it is there, the claim
// cannot vanish, so a restarted provisioner always finds the claim, and
// through the volume's name (prefix-<claim UID>, CreateVolume being
// idempotent by name) the volume.
const FinalizerInFlight = inflight.Finalizer

// recordedElsewhere, in node-deployment mode, is the other node whose
// provisioner holds the claim's record ("" for none): its local volume
// must be cleaned up before this node makes one.
func (p *Provisioner) recordedElsewhere(claim *v1.PersistentVolumeClaim) string {
	if p.o.Node == nil || !inflight.Holds(claim) {
		return ""
	}
	if node := claim.Annotations[inflight.AnnNode]; node != "" && node != p.o.Node.NodeName {
		return node
	}
	return ""
}
