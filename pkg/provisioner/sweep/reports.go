package sweep

import (
	"fmt"
	"slices"

	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// pvHandler feeds the memory from the PV informer: every PV it shows, on
// every event (a reclaim policy patched to Retain shows as an update).
func (s *Sweeper) pvHandler(logger klog.Logger) cache.ResourceEventHandler {
	note := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		pv, ok := obj.(*v1.PersistentVolume)
		if !ok {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pvs.note(logger, pv)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    note,
		UpdateFunc: func(_, obj any) { note(obj) },
		DeleteFunc: note,
	}
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

// fate says in an event and the report list what the sweep does with an
// orphan and why.
func (s *Sweeper) fate(r ReportedVolume, abandonedWhy string) string {
	switch r.Reason {
	case Deleting, KeptYoung:
		return fmt.Sprintf("it carries this cluster's mark for a Delete class, was made while this provisioner watched the PVs and no PV named it: deleted once orphaned for %s", s.o.MinAge)
	case KeptAbandoned:
		return fmt.Sprintf("the provisioner abandoned it (%s): reported only, never deleted by the sweep", abandonedWhy)
	case KeptReportPolicy:
		return "reported only (--orphan-policy=report)"
	case KeptRetainedByPV:
		return "a PV named it with a reclaim policy other than Delete: kept (reported only)"
	case KeptNamedByPV:
		return "a PV named it since this provisioner started; whoever deleted the PV and not the volume may want the disk: kept (reported only)"
	case KeptUnreadablePV:
		return fmt.Sprintf("an in-tree PV of the plugin migrated to this driver could not be read (%s), so the sweep deletes nothing: kept (reported only)", s.pvs.unreadableOne())
	case KeptHistoryUnknown:
		return "it existed before this provisioner first listed the backend, so a PV it never saw may have kept it: kept (reported only)"
	}
	switch r.Mark {
	case OwnedRetain:
		return "it was made for a class that retains its volumes, so it is kept (reported only)"
	case OtherCluster:
		return "another cluster's mark: not deleted"
	}
	return fmt.Sprintf("no %s mark of this cluster: not provably ours, not deleted", request.OwnerKey)
}
