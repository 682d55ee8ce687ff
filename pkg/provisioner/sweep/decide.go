package sweep

import (
	"time"

	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
)

// Ownership is what a volume's mark proves, and a label of the orphan
// gauge.
type Ownership string

// The ownerships. Only OwnedDelete volumes are ever deleted.
const (
	// Unmarked: no mark. Made by another cluster, another tool, or by
	// tether while the policy was not delete (or the driver drops the
	// mark): not provably ours.
	Unmarked Ownership = "none"
	// OtherCluster: marked by another cluster sharing the backend.
	OtherCluster Ownership = "other-cluster"
	// OwnedRetain: ours, made for a class that retains its volumes; an
	// admin who deleted its Released PV may be keeping the disk.
	OwnedRetain Ownership = "retain"
	// OwnedDelete: ours, made for a Delete class.
	OwnedDelete Ownership = "delete"
	// Unlisted: an abandoned volume (Sweeper.Abandoned) that the driver's
	// listing does not show by name, so its mark is unknown.
	Unlisted Ownership = "unlisted"
)

var allOwnerships = []Ownership{Unmarked, OtherCluster, OwnedRetain, OwnedDelete, Unlisted}

// ownershipOf reads a listed volume's mark against this cluster's ID.
func ownershipOf(volumeContext map[string]string, cluster string) Ownership {
	c, reclaim, ok := request.ParseOwnerMark(volumeContext[request.OwnerKey])
	switch {
	case !ok || cluster == "":
		return Unmarked
	case c != cluster:
		return OtherCluster
	case reclaim != v1.PersistentVolumeReclaimDelete:
		return OwnedRetain
	}
	return OwnedDelete
}

// Action is what the sweep does with an orphan on one sweep.
type Action int

// The actions.
const (
	// ActionWatch: seen orphaned for the first time; the caches may lag,
	// so wait for the next sweep.
	ActionWatch Action = iota
	// ActionReport: an event, the gauge and the report list.
	ActionReport
	// ActionDelete: report, re-check on fresh reads, delete.
	ActionDelete
)

func (a Action) String() string {
	switch a {
	case ActionWatch:
		return "watch"
	case ActionReport:
		return "report"
	case ActionDelete:
		return "delete"
	}
	return "unknown"
}

// PVHistory is what the PVs this process has seen said of a volume.
type PVHistory int

// The histories, each stronger than the one before.
const (
	// PVNever: no PV seen by this process named the volume.
	PVNever PVHistory = iota
	// PVNamed: some PV named it (its handle, or its name), with the
	// Delete reclaim policy whenever it was seen.
	PVNamed
	// PVRetained: some PV named it while its reclaim policy was not
	// Delete: someone wanted the disk kept.
	PVRetained
)

// KeepReason says why the sweep does not delete an orphan, and is the
// reason label of the orphan gauge.
type KeepReason string

// The reasons, in the order Decide tries them.
const (
	// Deleting: nothing keeps it; it is deleted after the re-check.
	Deleting KeepReason = "deleting"
	// KeptAbandoned: the provisioner gave up cleaning it up
	// (Sweeper.Abandoned); only an admin deletes it.
	KeptAbandoned KeepReason = "abandoned"
	// KeptWatching: first seen orphaned on this sweep (not reported yet).
	KeptWatching KeepReason = "watching"
	// KeptReportPolicy: --orphan-policy=report.
	KeptReportPolicy KeepReason = "report-policy"
	// KeptMark: its mark is not this cluster's for a Delete class.
	KeptMark KeepReason = "mark"
	// KeptRetainedByPV: a PV named it with a reclaim policy other than
	// Delete while this process watched.
	KeptRetainedByPV KeepReason = "retained-by-pv"
	// KeptNamedByPV: a PV named it while this process watched; whoever
	// deleted the PV without the volume may want the disk.
	KeptNamedByPV KeepReason = "named-by-pv"
	// KeptUnreadablePV: an in-tree PV of the plugin migrated to this
	// driver could not be translated, so which volume it names is unknown.
	KeptUnreadablePV KeepReason = "unreadable-pv"
	// KeptHistoryUnknown: it already existed when this process started
	// listing (it was in one of its first listings), so PVs may have
	// named it, or kept it, before this process could see them.
	KeptHistoryUnknown KeepReason = "history-unknown"
	// KeptYoung: orphaned for less than the minimum age.
	KeptYoung KeepReason = "young"
)

var allKeepReasons = []KeepReason{Deleting, KeptAbandoned, KeptReportPolicy, KeptMark, KeptRetainedByPV,
	KeptNamedByPV, KeptUnreadablePV, KeptHistoryUnknown, KeptYoung}

// Facts is what the sweep knows of a volume that nothing (no PV, no
// claim) accounted for on a sweep.
type Facts struct {
	Policy Policy
	// Mark is what the volume's ownership mark proves.
	Mark Ownership
	// OrphanedSince is when it was first seen unaccounted for, on this
	// run of sweeps without a break; Now is this sweep's time.
	OrphanedSince, Now time.Time
	MinAge             time.Duration
	// PV is what the PVs this process has seen said of the volume.
	PV PVHistory
	// UnreadablePV: this process saw an in-tree PV of the plugin migrated
	// to this driver that it could not translate.
	UnreadablePV bool
	// Born: the volume was first listed after this process had listed the
	// backend completely, without it, baselineListings times: it was
	// made while this process watched the PVs.
	Born bool
	// GaveUp: the provisioner gave up cleaning it up (it abandoned it).
	GaveUp bool
}

// Decide is the sweep's decision for a volume nothing accounted for
// on this sweep, and, unless it deletes it, why it keeps it. It deletes
// only a volume that is provably this cluster's (OwnedDelete), that no PV
// named while this process watched, that was made while it watched (so no
// PV it did not see can have named it), orphaned for MinAge and seen so on
// an earlier sweep. It is pure.
func Decide(f Facts) (Action, KeepReason) {
	switch {
	case f.GaveUp:
		return ActionReport, KeptAbandoned
	case !f.OrphanedSince.Before(f.Now):
		return ActionWatch, KeptWatching
	case f.Policy != Delete:
		return ActionReport, KeptReportPolicy
	case f.Mark != OwnedDelete:
		return ActionReport, KeptMark
	case f.PV == PVRetained:
		return ActionReport, KeptRetainedByPV
	case f.PV == PVNamed:
		return ActionReport, KeptNamedByPV
	case f.UnreadablePV:
		return ActionReport, KeptUnreadablePV
	case !f.Born:
		return ActionReport, KeptHistoryUnknown
	case f.Now.Sub(f.OrphanedSince) < f.MinAge:
		return ActionReport, KeptYoung
	}
	return ActionDelete, Deleting
}

// Policy says what the sweep does with an orphan.
type Policy string

// The policies of --orphan-policy.
const (
	// Report: every orphan is reported (an event, the gauge, the report
	// list); none is deleted.
	Report Policy = "report"
	// Delete: as Report, and an orphan Decide allows is deleted.
	Delete Policy = "delete"
)
