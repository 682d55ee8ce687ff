package explain

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Input is everything an explanation looks at. A list that could not be
// read is nil and named in Unreadable; the explanation then says what it
// cannot tell instead of guessing.
type Input struct {
	Claim *v1.PersistentVolumeClaim
	// Now is the time the objects were read.
	Now time.Time
	// Volumes are the PVs read: every PV of the cluster, or only the one
	// the claim names in spec.volumeName (see Plan).
	Volumes []*v1.PersistentVolume
	// Classes are every StorageClass.
	Classes []*storagev1.StorageClass
	// SelectedNode is the node the claim's selected-node annotation names,
	// nil when it names none or the node does not exist.
	SelectedNode *v1.Node
	// Pods are the pods of the claim's namespace.
	Pods []*v1.Pod
	// Events are events about the claim (and about its pods: those are
	// used too).
	Events []*v1.Event
	// Leases are the provisioners' Leases read (LeaseNames), in any
	// namespace; others are passed over.
	Leases []*coordinationv1.Lease
	// Binders are the binders' Leases, nil when they were not looked for.
	Binders *BinderLeases
	// AnotherBinder are the AnotherBinder events of the claim and of its
	// volume (tether's binder saw another PV binder write them).
	AnotherBinder []*v1.Event
	// Capacities are the CSIStorageCapacity objects of every namespace.
	Capacities []*storagev1.CSIStorageCapacity
	// CSINodes are every CSINode (which drivers run on which node).
	CSINodes []*storagev1.CSINode
	// Unreadable names what could not be read, and why.
	Unreadable []Gap
}

// Gap is a resource that could not be read.
type Gap struct {
	Resource string `json:"resource"`
	Error    string `json:"error"`
}

// Explanation is the answer. Its JSON field names are stable, for scripts.
type Explanation struct {
	// Claim is namespace/name.
	Claim string `json:"claim"`
	// Phase is the claim's phase; Terminating when it is being deleted.
	Phase string `json:"phase"`
	// State is the claim's state in one line.
	State string     `json:"state"`
	Since *time.Time `json:"since,omitempty"`
	// Volume is the bound (or named) volume.
	Volume       string   `json:"volume,omitempty"`
	StorageClass string   `json:"storageClass,omitempty"`
	Request      string   `json:"request,omitempty"`
	AccessModes  []string `json:"accessModes,omitempty"`
	VolumeMode   string   `json:"volumeMode,omitempty"`
	// Finalizers say what holds a claim that is being deleted.
	Finalizers []Holder `json:"finalizers,omitempty"`
	// Binder is what the binder does with the claim now, in words (tether's
	// rules, which are KCM's but where docs/differences.md says).
	Binder string `json:"binder,omitempty"`
	// BinderRunning says which binder runs, from the binders' Leases.
	BinderRunning *BinderStatus `json:"binderRunning,omitempty"`
	// AnotherBinder is the latest AnotherBinder event of the claim or its
	// volume: another PV binder wrote it beside tether's.
	AnotherBinder *EventLine `json:"anotherBinder,omitempty"`
	// Candidates are the volumes of the claim's class and those pre-bound
	// to it, each with the first reason the binder passes it over.
	Candidates []Candidate `json:"candidates,omitempty"`
	// ReasonCounts count the candidates by reason, the most common first.
	ReasonCounts []ReasonCount `json:"reasonCounts,omitempty"`
	// BestCandidates are the few nearest: matches first, then the volumes
	// passed over latest in the binder's checks (none claimed by another).
	BestCandidates []Candidate `json:"bestCandidates,omitempty"`
	// VolumesOfOtherClasses counts the other volumes by class.
	VolumesOfOtherClasses map[string]int `json:"volumesOfOtherClasses,omitempty"`
	// BestMatch is the volume the binder would take now.
	BestMatch string `json:"bestMatch,omitempty"`
	// BestMatchOnceScheduled is, for a class that waits for the first
	// consumer, the volume the binder would take once a node is selected
	// (if that node is in the volume's node affinity).
	BestMatchOnceScheduled string        `json:"bestMatchOnceScheduled,omitempty"`
	Provisioning           *Provisioning `json:"provisioning,omitempty"`
	// NodeLoss is the binder's release of the claim for node loss, waited
	// for or done (or, for a claim made again, its earlier claim's).
	NodeLoss *NodeLoss `json:"nodeLoss,omitempty"`
	// Cause is why the claim is in this state, with what to do; nil when
	// nothing is wrong (a Bound claim).
	Cause      *Cause `json:"cause,omitempty"`
	Unreadable []Gap  `json:"unreadable,omitempty"`
}

// Holder is a finalizer on a claim being deleted, and why it is there.
type Holder struct {
	Finalizer string `json:"finalizer"`
	Why       string `json:"why"`
}

// Candidate is one volume looked at for an unbound claim.
type Candidate struct {
	Volume   string `json:"volume"`
	Capacity string `json:"capacity"`
	// Match is true when the binder may take the volume (Reason empty).
	Match bool `json:"match"`
	// Reason is a binder.MismatchReason.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Cause is the reason a claim is not bound, and what to do about it.
type Cause struct {
	// Reason is one of the Cause* constants.
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Action is what to do, when known.
	Action string `json:"action,omitempty"`
}

// Provisioning is the dynamic provisioning path of an unbound claim.
type Provisioning struct {
	// Provisioner is the one the class names.
	Provisioner string `json:"provisioner"`
	// Annotated is true when the binder has handed the claim to it
	// (volume.kubernetes.io/storage-provisioner).
	Annotated bool `json:"annotated"`
	// Leases are the Leases of provisioners for this driver.
	Leases []Lease `json:"leases,omitempty"`
	// ProvisionerRunning is "yes" (a held Lease, its events on the claim or
	// its in-flight record), "likely" (capacity published for the class),
	// "no" (no sign of one) or "unknown" (Leases could not be read).
	ProvisionerRunning string `json:"provisionerRunning"`
	// Evidence says what ProvisionerRunning rests on.
	Evidence string `json:"evidence"`
	// DriverNodes are the nodes whose CSINode lists the driver.
	DriverNodes          []string `json:"driverNodes,omitempty"`
	WaitForFirstConsumer bool     `json:"waitForFirstConsumer"`
	SelectedNode         string   `json:"selectedNode,omitempty"`
	// NodeProvisioner says whether a node-deployment provisioner is known
	// to run on the selected node.
	NodeProvisioner string      `json:"nodeProvisioner,omitempty"`
	Pods            []Pod       `json:"pods,omitempty"`
	InFlight        *InFlight   `json:"inFlight,omitempty"`
	LastFailure     *Failure    `json:"lastFailure,omitempty"`
	Capacity        []Capacity  `json:"capacity,omitempty"`
	Events          []EventLine `json:"events,omitempty"`
}

// Lease is a provisioner's leader-election Lease.
type Lease struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Node is set for a node-deployment provisioner's Lease.
	Node   string `json:"node,omitempty"`
	Holder string `json:"holder,omitempty"`
	// Renewed is the holder's last renewal.
	Renewed *time.Time `json:"renewed,omitempty"`
	// Held is true when the holder renewed it within its duration.
	Held bool `json:"held"`
}

// Pod is a pod that uses the claim.
type Pod struct {
	Name      string `json:"name"`
	Node      string `json:"node,omitempty"`
	Scheduled bool   `json:"scheduled"`
	// Scheduler is the scheduler's last word on an unscheduled pod.
	Scheduler string `json:"scheduler,omitempty"`
}

// InFlight is tether's provisioner's in-flight record on the claim.
type InFlight struct {
	Volume string `json:"volume,omitempty"`
	Driver string `json:"driver,omitempty"`
	// Since is the first provisioning attempt the events show.
	Since *time.Time `json:"since,omitempty"`
}

// Failure is the last ProvisioningFailed event.
type Failure struct {
	Message string    `json:"message"`
	Count   int32     `json:"count"`
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
	// Retry is the retry state in words.
	Retry string `json:"retry"`
}

// Capacity is one CSIStorageCapacity of the class.
type Capacity struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Segment is the topology segment, as key=value pairs.
	Segment           string `json:"segment"`
	Capacity          string `json:"capacity,omitempty"`
	MaximumVolumeSize string `json:"maximumVolumeSize,omitempty"`
	// Enough is true when a volume of the request fits.
	Enough bool `json:"enough"`
	// SelectedNode is true when the selected node is in the segment.
	SelectedNode bool `json:"selectedNode,omitempty"`
}

// EventLine is an event about the claim.
type EventLine struct {
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	From    string    `json:"from"`
	Count   int32     `json:"count"`
	Last    time.Time `json:"last"`
}

// The causes. The values are stable; the binder.Mismatch* reasons are
// causes too, when the claim waits for a static volume.
const (
	CauseInvalidClaim          = "InvalidClaim"
	CauseLost                  = "Lost"
	CauseTerminating           = "Terminating"
	CauseVolumeNameMissing     = "NamedVolumeMissing"
	CauseVolumeNameMismatch    = "NamedVolumeMismatch"
	CauseVolumeNameTaken       = "NamedVolumeTaken"
	CauseBinderNotActed        = "BinderNotActed"
	CauseNoClass               = "NoStorageClass"
	CauseClassNotFound         = "StorageClassNotFound"
	CauseNoVolumeOfClass       = "NoVolumeOfClass"
	CauseWaitForFirstConsumer  = "WaitForFirstConsumer"
	CausePodNotScheduled       = "PodNotScheduled"
	CauseNoCapacity            = "NoCapacity"
	CauseNotAnnotated          = "NotHandedToProvisioner"
	CauseNoProvisioner         = "NoProvisioner"
	CauseNoNodeProvisioner     = "NoProvisionerOnNode"
	CauseProvisioningFailed    = "ProvisioningFailed"
	CauseProvisioning          = "Provisioning"
	CauseWaitingForProvisioner = "WaitingForProvisioner"
	CauseNoBinder              = "NoBinder"
	CauseUnknown               = "CannotTell"
)
