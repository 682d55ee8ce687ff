package sweep

import (
	"context"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tether-csi/tether/pkg/provisioner/claimlock"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// ReasonOrphanVolume is the reason of the sweep's events (a warning for
// each orphan reported, a normal event for each one deleted), recorded on
// the driver's CSIDriver object.
const ReasonOrphanVolume = "OrphanVolume"

// ListingDriver is the CSI driver as the sweep calls it: ListVolumes (the
// LIST_VOLUMES capability) to find the volumes, DeleteVolume for a proven
// orphan, and its name, which PVs and the CSIDriver object carry.
type ListingDriver interface {
	DriverName() string
	ListVolumes(context.Context, *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error)
	DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error)
}

// PVEvents is the PV informer the sweep learns from (a
// cache.SharedIndexInformer): it remembers every volume any PV it shows
// names, for the life of the process.
type PVEvents interface {
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	IsStopped() bool
}

// Options configure the orphan sweep.
type Options struct {
	// Driver is listed, and is the one the sweep deletes from. In a
	// process that also provisions, it is the Provisioner's driver.
	Driver ListingDriver
	// Client reads the CSIDriver object (for the events) and, on the
	// re-check before a deletion, the PV of the volume's name.
	Client kubernetes.Interface
	// Request is the Provisioner's request options: its volume names
	// (VolumeNamePrefix, VolumeNameUUIDLen) tell ours from others', and
	// Owner is this cluster's ID in the ownership mark.
	Request request.Options
	// Locks is the Provisioner's per-claim lock set: with whole claim
	// UIDs in names, a deletion holds its claim's lock, so that no
	// Provision of that claim runs meanwhile. Required: a set of its own
	// would exclude nothing.
	Locks  *claimlock.Set
	Policy Policy
	// MinAge: a volume is deleted only after it was seen orphaned this long
	// ago, and again on a later sweep, and once more on fresh reads.
	MinAge time.Duration
	// Interval between sweeps.
	Interval   time.Duration
	Recorder   record.EventRecorder
	Registerer prometheus.Registerer
	// Claims and Volumes are the informer caches the sweep reads (claims
	// first); only a candidate for deletion is read again from the API.
	Claims  corelisters.PersistentVolumeClaimLister
	Volumes corelisters.PersistentVolumeLister
	// ClaimNames and VolumeNames, when the caches keep only some claims
	// and PVs whole, hold the names of the others: for every claim, the
	// volume name it would be provisioned under; for every PV, its name
	// and its CSI handle. Nil: the caches keep every claim and PV.
	ClaimNames, VolumeNames Names
	// SavePending, if set, says whether this process's library may still
	// save a PV of a volume name (the Provisioner's SavePending): such a
	// volume is accounted for, whatever the API server holds now.
	SavePending func(name string) bool
	// VolumeEvents is the informer behind Volumes; New adds a handler to
	// it.
	VolumeEvents PVEvents
	// Clock is the sweep's time (when a volume was first seen orphaned,
	// or abandoned); nil is time.Now.
	Clock func() time.Time
}

// Names answers whether a name is held (scope.Seen): true for every name
// held, and rarely for another. Until Complete, it may not hold every
// name yet (a listing behind the watch), and the sweep does not run.
type Names interface {
	Has(name string) bool
	Complete() bool
}

// Sweeper finds backend volumes that carry our name prefix but that no PV
// and no claim accounts for: volumes leaked by someone, made behind our
// back, or made by another cluster on a shared backend. It reports them;
// with the delete policy it deletes those Decide allows: this
// cluster's, made while it watched, never named by a PV it saw.
// external-provisioner never lists volumes, so it cannot see them.
type Sweeper struct {
	o     Options
	pvReg cache.ResourceEventHandlerRegistration

	mu sync.Mutex
	// firstSeen is when each orphan of the last sweep was first seen
	// orphaned (in a run of sweeps that all found it so).
	firstSeen map[string]time.Time
	pvs       *pvMemory
	listings  listingMemory
	abandoned map[string]abandonedVolume // by volume name
	reports   []ReportedVolume           // of the last sweep

	orphans *prometheus.GaugeVec
	deleted prometheus.Counter
	// hook, for tests, runs between the sweep's reads: after the claims,
	// before the PVs.
	hook func()
	// now is Options.Clock, or time.Now.
	now func() time.Time
}

// deleteOutcome is what came of a deletion.
type deleteOutcome int

const (
	deleteFailed deleteOutcome = iota
	deletedIt
	accountedFor  // on the re-check's reads: no orphan
	keptOnRecheck // the decision changed (a PV event, an abandoned volume)
)
