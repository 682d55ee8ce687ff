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

// Abandoned puts the volume of name (its CreateVolume name, or its ID
// when the driver uses names as IDs) on the report list for good, for as
// long as this process lives: the provisioner gave up cleaning it up (an
// in-flight clean-up that can never complete) and only an admin may
// delete it. The sweep reports it on every sweep (an OrphanVolume warning,
// the gauge with reason "abandoned") and never deletes it, whatever its
// mark. Calling it again updates the reason.
func (s *Sweeper) Abandoned(name, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.abandoned[name]
	if !ok {
		a.since = s.now()
	}
	a.reason = reason
	s.abandoned[name] = a
}

// abandonedOf finds the abandoned volume of id or name.
func (s *Sweeper) abandonedOf(id, name string) (abandonedVolume, bool) {
	if a, ok := s.abandoned[name]; ok && name != "" {
		return a, true
	}
	a, ok := s.abandoned[id]
	return a, ok
}

// abandonedLocked is the reports of the abandoned volumes that are not
// among the orphans found (those are reported as orphans, abandoned):
// with their ID and mark when the listing all shows them, else unlisted.
func (s *Sweeper) abandonedLocked(all, found map[string]listed) []ReportedVolume {
	var out []ReportedVolume
	for name, a := range s.abandoned {
		r := ReportedVolume{Name: name, Mark: Unlisted, Since: a.since, Action: ActionReport, Reason: KeptAbandoned}
		skip := false
		for id, l := range all {
			if l.name != name && id != name {
				continue
			}
			if _, orphan := found[id]; orphan {
				skip = true
				break
			}
			r.VolumeID, r.Name, r.Mark = id, l.name, l.mark
		}
		if skip {
			continue
		}
		r.Detail = s.fate(r, a.reason)
		out = append(out, r)
	}
	return out
}

// Orphans is the sweep's report list: the orphans of the last sweep (the
// ones deleted or accounted for on its re-check left out), each with its
// mark and why it is kept, and every abandoned volume, also those
// abandoned since the last sweep.
func (s *Sweeper) Orphans() []ReportedVolume {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.reports)
	reported := map[string]bool{}
	for i := range out {
		r := &out[i]
		if a, ok := s.abandonedOf(r.VolumeID, r.Name); ok {
			if r.Reason != KeptAbandoned {
				r.Action, r.Reason = ActionReport, KeptAbandoned
				r.Detail = s.fate(*r, a.reason)
			}
			reported[r.Name], reported[r.VolumeID] = true, true
		}
	}
	for name, a := range s.abandoned {
		if reported[name] {
			continue
		}
		r := ReportedVolume{Name: name, Mark: Unlisted, Since: a.since, Action: ActionReport, Reason: KeptAbandoned}
		r.Detail = s.fate(r, a.reason)
		out = append(out, r)
	}
	sortReports(out)
	return out
}
