package sweep

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// ReportedVolume is one volume on the sweep's report list: an orphan of the
// last sweep (nothing in the API accounted for it), or a volume the
// provisioner abandoned.
type ReportedVolume struct {
	// VolumeID is the driver's ID; "" for an abandoned volume that the
	// driver's listing does not show by name.
	VolumeID string
	// Name is the volume's name (its CreateVolume name).
	Name string
	Mark Ownership
	// Since is when it was first seen orphaned, or abandoned.
	Since time.Time
	// Action is what the last sweep did or does with it; Reason why it
	// keeps it (Deleting: it does not, and a deletion that failed is
	// tried again on the next sweep).
	Action Action
	Reason KeepReason
	// Detail says the same in words.
	Detail string
}

// message is the report's OrphanVolume warning.
func (r ReportedVolume) message(driver string) string {
	id := r.VolumeID
	if id == "" {
		id = "(not listed)"
	}
	if r.Reason == KeptAbandoned {
		return fmt.Sprintf("backend volume %s (name %s) of driver %s was abandoned by the provisioner; %s", id, r.Name, driver, r.Detail)
	}
	return fmt.Sprintf("backend volume %s (name %s) of driver %s is tracked by no PV and no claim; %s", id, r.Name, driver, r.Detail)
}

func sortReports(rs []ReportedVolume) {
	slices.SortFunc(rs, func(a, b ReportedVolume) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.VolumeID, b.VolumeID))
	})
}

// abandonedVolume is a volume the provisioner gave up cleaning up.
type abandonedVolume struct {
	reason string
	since  time.Time
}
