package provisioner

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// OrphanPolicy says what the sweep does with an orphan.
type OrphanPolicy string

// The policies of --orphan-policy.
const (
	OrphanReport OrphanPolicy = "report"
	OrphanDelete OrphanPolicy = "delete"
)

// ReasonOrphanVolume is the event reason for a volume nobody tracks.
const ReasonOrphanVolume = "OrphanVolume"

// ListingDriver is the optional ListVolumes call.
type ListingDriver interface {
	ListVolumes(context.Context, *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error)
}

// SweepOptions configure the orphan sweep.
type SweepOptions struct {
	Policy OrphanPolicy
	// MinAge: a volume is deleted only after it was seen orphaned this long
	// ago, and again on a later sweep, and once more on fresh reads.
	MinAge time.Duration
	// Interval between sweeps.
	Interval   time.Duration
	Recorder   record.EventRecorder
	Registerer prometheus.Registerer
}

// Sweeper finds backend volumes that carry our name prefix but that no PV
// and no in-flight claim tracks: volumes leaked by someone, or made behind
// our back. external-provisioner never lists volumes, so it cannot see them.
type Sweeper struct {
	p         *Provisioner
	o         SweepOptions
	mu        sync.Mutex
	firstSeen map[string]time.Time
	orphans   prometheus.Gauge
	deleted   prometheus.Counter
}

// NewSweeper returns a Sweeper; Run starts it.
func (p *Provisioner) NewSweeper(o SweepOptions) (*Sweeper, error) {
	if _, ok := p.o.Driver.(ListingDriver); !ok {
		return nil, fmt.Errorf("the driver cannot list volumes")
	}
	if o.Policy != OrphanReport && o.Policy != OrphanDelete {
		return nil, fmt.Errorf("--orphan-policy must be report or delete, not %q", o.Policy)
	}
	if o.Interval <= 0 {
		return nil, fmt.Errorf("the orphan sweep interval must be positive")
	}
	s := &Sweeper{p: p, o: o, firstSeen: map[string]time.Time{},
		orphans: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tether_provisioner_orphan_volumes",
			Help: "Backend volumes with our name prefix that no PV and no in-flight claim tracks, at the last sweep."}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_provisioner_orphan_volumes_deleted_total",
			Help: "Orphan backend volumes deleted by the sweep (--orphan-policy=delete)."}),
	}
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
	return regexp.MustCompile(`^` + regexp.QuoteMeta(s.p.o.Request.VolumeNamePrefix) + `-[0-9a-f-]{8,36}$`)
}

// Sweep runs once.
func (s *Sweeper) Sweep(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	found, err := s.candidates(ctx)
	if err != nil {
		return err
	}
	s.orphans.Set(float64(len(found)))
	now := time.Now()
	s.mu.Lock()
	seen := s.firstSeen
	s.firstSeen = map[string]time.Time{}
	for id := range found {
		if t, ok := seen[id]; ok {
			s.firstSeen[id] = t
		} else {
			s.firstSeen[id] = now
		}
	}
	s.mu.Unlock()
	for id, name := range found {
		first := s.firstSeen[id]
		msg := fmt.Sprintf("backend volume %s (name %s) of driver %s is tracked by no PV and no claim", id, name, s.p.o.Driver.DriverName())
		logger.Info("Orphan volume", "volume", id, "name", name, "firstSeen", first)
		s.event(ctx, v1.EventTypeWarning, msg)
		if s.o.Policy != OrphanDelete || now.Sub(first) < s.o.MinAge || first.Equal(now) {
			continue
		}
		// Second confirmation, on fresh reads from the API server.
		again, err := s.candidates(ctx)
		if err != nil {
			return err
		}
		if _, still := again[id]; !still {
			continue
		}
		if _, err := s.p.o.Driver.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			logger.Error(err, "Deleting an orphan volume", "volume", id)
			continue
		}
		s.deleted.Inc()
		logger.Info("Deleted an orphan volume", "volume", id, "name", name, "orphanSince", first)
		s.event(ctx, v1.EventTypeNormal, fmt.Sprintf("deleted orphan backend volume %s (name %s), orphaned since %s", id, name, first.Format(time.RFC3339)))
	}
	return nil
}

// candidates lists the driver's volumes that look like ours and that no PV
// and no in-flight claim accounts for, read from the API server (not a
// cache). The map is volume ID to name.
func (s *Sweeper) candidates(ctx context.Context) (map[string]string, error) {
	lister := s.p.o.Driver.(ListingDriver)
	ours := s.ourName()
	out := map[string]string{}
	token := ""
	for {
		resp, err := lister.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: token})
		if err != nil {
			return nil, fmt.Errorf("ListVolumes: %w", err)
		}
		for _, e := range resp.Entries {
			vol := e.GetVolume()
			if name := volumeName(vol, ours); name != "" {
				out[vol.GetVolumeId()] = name
			}
		}
		if token = resp.NextToken; token == "" {
			break
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	pvs, err := s.p.o.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, pv := range pvs.Items {
		if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == s.p.o.Driver.DriverName() {
			delete(out, pv.Spec.CSI.VolumeHandle)
		}
	}
	claims, err := s.p.o.Client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	inFlight := map[string]bool{}
	for _, c := range claims.Items {
		if slices.Contains(c.Finalizers, FinalizerInFlight) {
			inFlight[VolumeName(s.p.o.Request.VolumeNamePrefix, string(c.UID), s.p.o.Request.VolumeNameUUIDLen)] = true
		}
	}
	for id, name := range out {
		if inFlight[name] {
			delete(out, id)
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

// event records on the driver's CSIDriver object, the one thing in the API
// that stands for the backend.
func (s *Sweeper) event(ctx context.Context, kind, msg string) {
	if s.o.Recorder == nil {
		return
	}
	d, err := s.p.o.Client.StorageV1().CSIDrivers().Get(ctx, s.p.o.Driver.DriverName(), metav1.GetOptions{})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("No CSIDriver object to record the orphan event on", "err", err)
		return
	}
	s.o.Recorder.Event(d, kind, ReasonOrphanVolume, msg)
}
