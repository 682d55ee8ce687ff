package sweep

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// New checks the options, returns a Sweeper and starts remembering PVs
// (a handler on VolumeEvents, its logger ctx's); Run starts the sweeps.
func New(ctx context.Context, o Options) (*Sweeper, error) {
	if o.Driver == nil || o.Client == nil {
		return nil, fmt.Errorf("the orphan sweep needs a client and a driver that can list volumes")
	}
	if o.Request.VolumeNamePrefix == "" {
		return nil, fmt.Errorf("the orphan sweep needs the volume name prefix")
	}
	if o.Locks == nil {
		return nil, fmt.Errorf("the orphan sweep needs the provisioner's claim locks")
	}
	if o.Policy != Report && o.Policy != Delete {
		return nil, fmt.Errorf("--orphan-policy must be report or delete, not %q", o.Policy)
	}
	if o.Policy == Delete && o.Request.Owner == "" {
		return nil, fmt.Errorf("--orphan-policy=delete needs the cluster's ID to mark the volumes it makes")
	}
	if o.Interval <= 0 {
		return nil, fmt.Errorf("the orphan sweep interval must be positive")
	}
	if o.Claims == nil || o.Volumes == nil || o.VolumeEvents == nil {
		return nil, fmt.Errorf("the orphan sweep needs claim and PV listers and the PV informer")
	}
	now := o.Clock
	if now == nil {
		now = time.Now
	}
	s := &Sweeper{o: o, firstSeen: map[string]time.Time{}, now: now,
		pvs:       newPVMemory(o.Driver.DriverName()),
		listings:  listingMemory{volumes: map[string]*listedState{}},
		abandoned: map[string]abandonedVolume{},
		orphans: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tether_provisioner_orphan_volumes",
			Help: "Backend volumes with our name prefix that no PV and no claim accounted for on the last two sweeps, and volumes the provisioner abandoned, by what their ownership mark proves (delete, retain, other-cluster, none; unlisted: abandoned, not in the driver's listing) and why the sweep keeps them (reason; deleting: it does not)."},
			[]string{"mark", "reason"}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_provisioner_orphan_volumes_deleted_total",
			Help: "Orphan backend volumes deleted by the sweep (--orphan-policy=delete)."}),
	}
	reg, err := o.VolumeEvents.AddEventHandler(s.pvHandler(klog.FromContext(ctx).WithName("orphans")))
	if err != nil {
		return nil, fmt.Errorf("watching PVs for the orphan sweep: %w", err)
	}
	s.pvReg = reg
	s.setGauge(nil)
	if o.Registerer != nil {
		o.Registerer.MustRegister(s.orphans, s.deleted)
	}
	return s, nil
}

// Run sweeps every Interval until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("orphans")
	ctx = klog.NewContext(ctx, logger)
	ticker := time.NewTicker(s.o.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Orphan sweep failed")
		}
	}
}

// ourName matches the names the provisioner gives volumes.
func (s *Sweeper) ourName() *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(s.o.Request.VolumeNamePrefix) + `-[0-9a-f-]{8,36}$`)
}

// pvInformerLive says why the sweep cannot trust its memory of PVs, nil when
// it can: the informer must have shown every PV, and still run, and the
// names of the claims and PVs not kept whole must be complete.
func (s *Sweeper) pvInformerLive() error {
	if s.o.VolumeEvents.IsStopped() {
		return errors.New("the PV informer has stopped: no sweep")
	}
	if !s.pvReg.HasSynced() {
		return errors.New("the PV informer has not shown every PV yet: no sweep")
	}
	if s.o.VolumeNames != nil && !s.o.VolumeNames.Complete() {
		return errors.New("the listing of PVs is still behind the watch: no sweep")
	}
	if s.o.ClaimNames != nil && !s.o.ClaimNames.Complete() {
		return errors.New("the listing of claims is still behind the watch: no sweep")
	}
	return nil
}

// Sweep runs one sweep now (Run calls it every Interval). It sweeps
// nothing, and says why, before the PV informer has shown every PV and
// after it stopped.
func (s *Sweeper) Sweep(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if err := s.pvInformerLive(); err != nil {
		return err
	}
	all, err := s.list(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.listings.note(all)
	s.mu.Unlock()
	found, err := s.unaccounted(ctx, all)
	if err != nil {
		return err
	}
	now := s.now()
	s.mu.Lock()
	seen := s.firstSeen
	s.firstSeen = make(map[string]time.Time, len(found))
	reports := make([]ReportedVolume, 0, len(found)+len(s.abandoned))
	for id, l := range found {
		first, ok := seen[id]
		if !ok {
			first = now
		}
		s.firstSeen[id] = first
		reports = append(reports, s.decideLocked(id, l, first, now))
	}
	reports = append(reports, s.abandonedLocked(all, found)...)
	s.mu.Unlock()
	sortReports(reports)

	var csiDriver *storagev1.CSIDriver
	kept := make([]ReportedVolume, 0, len(reports))
	for i := range reports {
		r := &reports[i]
		logger := logger.WithValues("volume", r.VolumeID, "name", r.Name, "mark", r.Mark, "since", r.Since, "reason", r.Reason)
		if r.Action == ActionWatch {
			logger.V(4).Info("Volume accounted for by nothing; waiting for the next sweep")
			kept = append(kept, *r)
			continue
		}
		logger.Info("Orphan volume")
		if csiDriver == nil {
			if csiDriver = s.csiDriver(ctx); csiDriver == nil {
				csiDriver = &storagev1.CSIDriver{} // none: record nothing
			}
		}
		s.event(csiDriver, v1.EventTypeWarning, r.message(s.o.Driver.DriverName()))
		if r.Action == ActionDelete {
			switch out, err := s.deleteOne(ctx, r); out {
			case deleteFailed:
				logger.Error(err, "Deleting an orphan volume")
			case deletedIt:
				s.event(csiDriver, v1.EventTypeNormal, fmt.Sprintf("deleted orphan backend volume %s (name %s), orphaned since %s", r.VolumeID, r.Name, r.Since.Format(time.RFC3339)))
				continue
			case accountedFor:
				continue
			}
		}
		kept = append(kept, *r)
	}
	s.setGauge(reports)
	s.mu.Lock()
	s.reports = kept
	s.mu.Unlock()
	return ctx.Err()
}

// decideLocked is the decision for orphan id on what the sweep knows now.
func (s *Sweeper) decideLocked(id string, l listed, first, now time.Time) ReportedVolume {
	ab, abandoned := s.abandonedOf(id, l.name)
	action, reason := Decide(Facts{Policy: s.o.Policy, Mark: l.mark, OrphanedSince: first, Now: now, MinAge: s.o.MinAge,
		PV: s.pvs.of(id, l.name), UnreadablePV: len(s.pvs.unreadable) > 0, Born: s.listings.born(id), GaveUp: abandoned})
	r := ReportedVolume{VolumeID: id, Name: l.name, Mark: l.mark, Since: first, Action: action, Reason: reason}
	r.Detail = s.fate(r, ab.reason)
	return r
}

// setGauge counts the reported orphans by mark and reason.
func (s *Sweeper) setGauge(reports []ReportedVolume) {
	counts := map[[2]string]int{}
	for _, r := range reports {
		if r.Action != ActionWatch {
			counts[[2]string{string(r.Mark), string(r.Reason)}]++
		}
	}
	for _, m := range allOwnerships {
		for _, k := range allKeepReasons {
			s.orphans.WithLabelValues(string(m), string(k)).Set(float64(counts[[2]string{string(m), string(k)}]))
		}
	}
}

// deleteOne re-checks one candidate on fresh reads and deletes it. With
// whole claim UIDs in names it holds the claim's provisioning lock, so no
// Provision of that claim in this process runs meanwhile. A decision that
// changed on the re-check is written into r.
func (s *Sweeper) deleteOne(ctx context.Context, r *ReportedVolume) (deleteOutcome, error) {
	logger := klog.FromContext(ctx)
	if uid, ok := s.claimUID(r.Name); ok {
		defer s.o.Locks.Lock(uid)()
	}
	if by := s.accountedFor(ctx, r.VolumeID, r.Name); by != "" {
		logger.Info("An orphan is accounted for on the re-check; not deleting it", "volume", r.VolumeID, "by", by)
		return accountedFor, nil
	}
	// Decide again on what the memory holds now: every PV event it took
	// in before the re-check's reads counts.
	s.mu.Lock()
	again := s.decideLocked(r.VolumeID, listed{name: r.Name, mark: r.Mark}, r.Since, s.now())
	s.mu.Unlock()
	if again.Action != ActionDelete {
		logger.Info("An orphan is kept on the re-check", "volume", r.VolumeID, "reason", again.Reason)
		*r = again
		return keptOnRecheck, nil
	}
	if _, err := s.o.Driver.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: r.VolumeID}); err != nil {
		return deleteFailed, err
	}
	s.deleted.Inc()
	logger.Info("Deleted an orphan volume", "volume", r.VolumeID, "name", r.Name)
	return deletedIt, nil
}

// claimUID is the claim UID in a volume name, when names hold whole UIDs.
func (s *Sweeper) claimUID(name string) (string, bool) {
	r := s.o.Request
	if r.VolumeNameUUIDLen > 0 {
		return "", false
	}
	return strings.CutPrefix(name, r.VolumeNamePrefix+"-")
}

// list is a complete listing of the driver's volumes that look like ours,
// by ID.
func (s *Sweeper) list(ctx context.Context) (map[string]listed, error) {
	lister := s.o.Driver
	ours := s.ourName()
	cluster := s.o.Request.Owner
	out := map[string]listed{}
	token := ""
	for {
		resp, err := lister.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: token})
		if err != nil {
			return nil, fmt.Errorf("ListVolumes: %w", err)
		}
		for _, e := range resp.Entries {
			vol := e.GetVolume()
			if name := volumeName(vol, ours); name != "" {
				out[vol.GetVolumeId()] = listed{name: name, mark: ownershipOf(vol.GetVolumeContext(), cluster)}
			}
		}
		if token = resp.NextToken; token == "" {
			return out, nil
		}
	}
}

// unaccounted is the listed volumes that no PV and no claim accounts for.
// The driver is listed first, then the caches: a volume that exists was
// recorded on its claim before it was made.
func (s *Sweeper) unaccounted(ctx context.Context, all map[string]listed) (map[string]listed, error) {
	out := map[string]listed{}
	if len(all) == 0 {
		return out, nil
	}
	a, err := s.account(ctx)
	if err != nil {
		return nil, err
	}
	for id, l := range all {
		if a.tracks(id, l.name) == "" {
			out[id] = l
		}
	}
	return out, nil
}

// volumeName finds a volume's name: its ID when the driver uses names as
// IDs, else a volume context value that has the form of our names.
func volumeName(vol *csi.Volume, ours *regexp.Regexp) string {
	if ours.MatchString(vol.GetVolumeId()) {
		return vol.GetVolumeId()
	}
	for _, v := range vol.GetVolumeContext() {
		if ours.MatchString(v) {
			return v
		}
	}
	return ""
}

// csiDriver reads the driver's CSIDriver object, the one thing in the API
// that stands for the backend, for the sweep's events; nil when there is
// none or no recorder.
func (s *Sweeper) csiDriver(ctx context.Context) *storagev1.CSIDriver {
	if s.o.Recorder == nil {
		return nil
	}
	d, err := s.o.Client.StorageV1().CSIDrivers().Get(ctx, s.o.Driver.DriverName(), metav1.GetOptions{})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("No CSIDriver object to record the orphan events on", "err", err)
		return nil
	}
	return d
}

func (s *Sweeper) event(d *storagev1.CSIDriver, kind, msg string) {
	if s.o.Recorder == nil || d.Name == "" {
		return
	}
	s.o.Recorder.Event(d, kind, ReasonOrphanVolume, msg)
}
