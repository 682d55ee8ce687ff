package binder

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/migration"
)

// Event reasons, the same as kube-controller-manager's.
const (
	ReasonFailedBinding        = "FailedBinding"
	ReasonVolumeMismatch       = "VolumeMismatch"
	ReasonWaitForFirstConsumer = "WaitForFirstConsumer"
	ReasonExternalProvisioning = "ExternalProvisioning"
	ReasonProvisioningFailed   = "ProvisioningFailed"
	ReasonClaimLost            = "ClaimLost"
	ReasonClaimMisbound        = "ClaimMisbound"
	ReasonVolumeFailedDelete   = "VolumeFailedDelete"
	ReasonVolumeFailedRecycle  = "VolumeFailedRecycle"
)

// Event is a Kubernetes event to record on the object a decision is about.
type Event struct {
	Type, Reason, Message string
}

func normal(reason, format string, args ...any) *Event {
	return &Event{Type: v1.EventTypeNormal, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func warning(reason, format string, args ...any) *Event {
	return &Event{Type: v1.EventTypeWarning, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// ClaimOp is the kind of change a claim decision asks for.
type ClaimOp int

const (
	// ClaimPending keeps the claim Pending (phase written only if it differs).
	ClaimPending ClaimOp = iota
	// ClaimBind binds the claim and Volume: the PV's claimRef, the PV's
	// phase, the claim's volumeName and annotations, the claim's phase. Each
	// step is skipped when already done.
	ClaimBind
	// ClaimLost sets the claim's phase to Lost.
	ClaimLost
	// ClaimProvision sets both storage-provisioner annotations to
	// Provisioner, and keeps the claim Pending.
	ClaimProvision
	// ClaimSetClass gives a claim with no class the default class.
	ClaimSetClass
)

func (op ClaimOp) String() string {
	return [...]string{"pending", "bind", "lost", "provision", "set-class"}[op]
}

// ClaimInput is everything a claim decision looks at.
type ClaimInput struct {
	Claim *v1.PersistentVolumeClaim
	// Needs and NeedsErr are ParseClaim(Claim).
	Needs    ClaimNeeds
	NeedsErr error
	// Class is the claim's StorageClass, nil when it has none or it does not exist.
	Class *storagev1.StorageClass
	// DefaultClass is the name of the default StorageClass, "" for none.
	DefaultClass string
	// Volume is the PV that spec.volumeName names, nil when unset or missing.
	Volume *v1.PersistentVolume
	// Match is the best volume found for an unbound claim with no
	// volumeName (already reserved for it), nil for none.
	Match *v1.PersistentVolume
	// Waited is how long the claim has existed.
	Waited time.Duration
}

// WaitingEventsAfter is how long a claim waits for its first consumer or
// for its external provisioner before the binder tells so in an event
// (WaitForFirstConsumer, ExternalProvisioning). kube-controller-manager
// tells at once and on every sync; a claim that is served within seconds
// needs no such notice, and under load those events were a third of the
// API writes of provisioning (and crowded out the ones that matter). The
// notice comes at the first sync past this age: within a resync period.
const WaitingEventsAfter = 5 * time.Second

// ClaimDecision is what to do with one claim.
type ClaimDecision struct {
	Op          ClaimOp
	Volume      *v1.PersistentVolume // ClaimBind
	Provisioner string               // ClaimProvision
	// MigratedTo, with ClaimProvision, is the CSI driver that the class's
	// in-tree plugin is migrated to (pv.kubernetes.io/migrated-to).
	MigratedTo string
	Class      string // ClaimSetClass
	Event      *Event // recorded on the claim, if set
}

// BindCompleted reports whether the claim has passed its first binding.
func BindCompleted(claim *v1.PersistentVolumeClaim) bool {
	return metav1.HasAnnotation(claim.ObjectMeta, storagehelpers.AnnBindCompleted)
}

// DelayBinding reports whether a class waits for the first consumer.
func DelayBinding(class *storagev1.StorageClass) bool {
	return class != nil && class.VolumeBindingMode != nil &&
		*class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// DecideClaim is the claim half of the binder: a pure function.
func DecideClaim(in ClaimInput) ClaimDecision {
	if BindCompleted(in.Claim) {
		return decideBoundClaim(in)
	}
	if in.NeedsErr != nil {
		return ClaimDecision{Op: ClaimPending, Event: warning(ReasonFailedBinding, "cannot bind the claim: %v", in.NeedsErr)}
	}
	if in.Claim.Spec.VolumeName != "" {
		return decideClaimWithVolumeName(in)
	}
	if in.Match != nil {
		return ClaimDecision{Op: ClaimBind, Volume: in.Match}
	}
	if !storagehelpers.PersistentVolumeClaimHasClass(in.Claim) && in.DefaultClass != "" {
		// Retroactive default class, as kube-controller-manager does.
		return ClaimDecision{Op: ClaimSetClass, Class: in.DefaultClass}
	}
	className := in.Needs.Class
	switch {
	case DelayBinding(in.Class) && !metav1.HasAnnotation(in.Claim.ObjectMeta, storagehelpers.AnnSelectedNode):
		return ClaimDecision{Op: ClaimPending, Event: in.waiting(normal(ReasonWaitForFirstConsumer, "waiting for first consumer to be created before binding"))}
	case className == "":
		return ClaimDecision{Op: ClaimPending, Event: normal(ReasonFailedBinding, "no persistent volumes available for this claim and no storage class is set")}
	case in.Class == nil:
		return ClaimDecision{Op: ClaimPending, Event: warning(ReasonProvisioningFailed, "storageclass.storage.k8s.io %q not found", className)}
	case in.Class.Provisioner == storagehelpers.NotSupportedProvisioner:
		return ClaimDecision{Op: ClaimPending, Event: normal(ReasonFailedBinding, "no persistent volumes available for this claim, and storage class %q has no provisioner", className)}
	default:
		// A class of a migrated in-tree plugin (kubernetes.io/aws-ebs, ...) is
		// provisioned by the CSI driver it is migrated to, as in KCM.
		provisioner, migratedTo := in.Class.Provisioner, ""
		if driver, ok := migration.CSIDriverFor(provisioner); ok {
			provisioner, migratedTo = driver, driver
		}
		return ClaimDecision{Op: ClaimProvision, Provisioner: provisioner, MigratedTo: migratedTo,
			Event: in.waiting(normal(ReasonExternalProvisioning, "waiting for a volume to be created by the external provisioner %q or by the administrator; if this takes long, check that the provisioner is running", provisioner))}
	}
}

// waiting keeps a waiting notice only once the claim has waited long
// enough (WaitingEventsAfter).
func (in ClaimInput) waiting(e *Event) *Event {
	if in.Waited < WaitingEventsAfter {
		return nil
	}
	return e
}

func decideClaimWithVolumeName(in ClaimInput) ClaimDecision {
	pv, name := in.Volume, in.Claim.Spec.VolumeName
	switch {
	case pv == nil:
		// The volume may not exist yet; stay Pending and look again when it does.
		return ClaimDecision{Op: ClaimPending}
	case pv.Spec.ClaimRef == nil:
		if err := Satisfies(pv, in.Needs); err != nil {
			return ClaimDecision{Op: ClaimPending, Event: warning(ReasonVolumeMismatch, "cannot bind to requested volume %q: %v", name, err)}
		}
		return ClaimDecision{Op: ClaimBind, Volume: pv}
	case PreBoundTo(pv, in.Needs):
		return ClaimDecision{Op: ClaimBind, Volume: pv}
	default:
		return ClaimDecision{Op: ClaimPending, Event: warning(ReasonFailedBinding, "volume %q already bound to a different claim", name)}
	}
}

func decideBoundClaim(in ClaimInput) ClaimDecision {
	switch pv := in.Volume; {
	case in.Claim.Spec.VolumeName == "":
		return ClaimDecision{Op: ClaimLost, Event: warning(ReasonClaimLost, "bound claim has lost its reference to a PersistentVolume; data on the volume is lost")}
	case pv == nil:
		return ClaimDecision{Op: ClaimLost, Event: warning(ReasonClaimLost, "bound claim has lost its PersistentVolume %q; data on the volume is lost", in.Claim.Spec.VolumeName)}
	case pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == in.Claim.UID:
		// Finish or repair the binding; every step already done is skipped.
		return ClaimDecision{Op: ClaimBind, Volume: pv}
	default:
		return ClaimDecision{Op: ClaimLost, Event: warning(ReasonClaimMisbound, "two claims are bound to the same volume %q; this one is bound incorrectly", pv.Name)}
	}
}
