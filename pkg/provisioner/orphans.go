package provisioner

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/inflight"
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

// OwnerKey is the CreateVolume parameter that marks a volume as made by
// this cluster's provisioner (RequestOptions.Owner). The sweep deletes a
// volume only when the driver's ListVolumes returns this key in the
// volume's context with this cluster's ID and the Delete reclaim policy.
const OwnerKey = "tether.dev/owner"

// OwnerMark is the value of OwnerKey: the reclaim policy of the class the
// volume was made for, a slash, and the cluster's ID (which may itself
// hold slashes).
func OwnerMark(cluster string, reclaim v1.PersistentVolumeReclaimPolicy) string {
	return string(reclaim) + "/" + cluster
}

// ParseOwnerMark splits a mark; ok is false when it is not one.
func ParseOwnerMark(mark string) (cluster string, reclaim v1.PersistentVolumeReclaimPolicy, ok bool) {
	r, c, ok := strings.Cut(mark, "/")
	if !ok || r == "" || c == "" {
		return "", "", false
	}
	return c, v1.PersistentVolumeReclaimPolicy(r), true
}

// Ownership is what a volume's mark proves, and the label of the orphan
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
)

var allOwnerships = []Ownership{Unmarked, OtherCluster, OwnedRetain, OwnedDelete}

// ownershipOf reads a listed volume's mark against this cluster's ID.
func ownershipOf(volumeContext map[string]string, cluster string) Ownership {
	c, reclaim, ok := ParseOwnerMark(volumeContext[OwnerKey])
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
	// Claims and Volumes are the informer caches the sweep reads (claims
	// first); only a candidate for deletion is read again from the API.
	Claims  corelisters.PersistentVolumeClaimLister
	Volumes corelisters.PersistentVolumeLister
}

// Sweeper finds backend volumes that carry our name prefix but that no PV
// and no claim accounts for: volumes leaked by someone, made behind our
// back, or made by another cluster on a shared backend. It reports them;
// with the delete policy it deletes those that carry this cluster's
// ownership mark for a Delete class. external-provisioner never lists
// volumes, so it cannot see them.
type Sweeper struct {
	p         *Provisioner
	o         SweepOptions
	mu        sync.Mutex
	firstSeen map[string]time.Time
	orphans   *prometheus.GaugeVec
	deleted   prometheus.Counter
	// hook, for tests, runs between the sweep's reads: after the claims,
	// before the PVs.
	hook func()
	// now is the clock (tests set it).
	now func() time.Time
}

// NewSweeper returns a Sweeper; Run starts it.
func (p *Provisioner) NewSweeper(o SweepOptions) (*Sweeper, error) {
	if _, ok := p.o.Driver.(ListingDriver); !ok {
		return nil, fmt.Errorf("the driver cannot list volumes")
	}
	if o.Policy != OrphanReport && o.Policy != OrphanDelete {
		return nil, fmt.Errorf("--orphan-policy must be report or delete, not %q", o.Policy)
	}
	if o.Policy == OrphanDelete && p.o.Request.Owner == "" {
		return nil, fmt.Errorf("--orphan-policy=delete needs the cluster's ID to mark the volumes it makes")
	}
	if o.Interval <= 0 {
		return nil, fmt.Errorf("the orphan sweep interval must be positive")
	}
	if o.Claims == nil || o.Volumes == nil {
		return nil, fmt.Errorf("the orphan sweep needs claim and PV listers")
	}
	s := &Sweeper{p: p, o: o, firstSeen: map[string]time.Time{}, now: time.Now,
		orphans: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tether_provisioner_orphan_volumes",
			Help: "Backend volumes with our name prefix that no PV and no claim accounted for on the last two sweeps, by what their ownership mark proves (delete: ours and deletable; retain, other-cluster, none: reported only)."},
			[]string{"mark"}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_provisioner_orphan_volumes_deleted_total",
			Help: "Orphan backend volumes deleted by the sweep (--orphan-policy=delete)."}),
	}
	for _, m := range allOwnerships {
		s.orphans.WithLabelValues(string(m))
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

// orphan is a listed volume that nothing accounts for.
type orphan struct {
	name string
	mark Ownership
}

// OrphanAction is what the sweep does with an orphan on one sweep.
type OrphanAction int

// The actions.
const (
	// Watch: seen orphaned for the first time; the caches may lag, so
	// wait for the next sweep.
	Watch OrphanAction = iota
	// Report: an event and the gauge.
	Report
	// Delete: report, re-check on fresh reads, delete.
	Delete
)

// DecideOrphan is the sweep's decision for a volume nothing accounted for
// on this sweep, first seen so at first (now when this is the first time).
// It is pure.
func DecideOrphan(policy OrphanPolicy, mark Ownership, first, now time.Time, minAge time.Duration) OrphanAction {
	switch {
	case !first.Before(now):
		return Watch
	case policy == OrphanDelete && mark == OwnedDelete && now.Sub(first) >= minAge:
		return Delete
	}
	return Report
}

// Sweep runs once.
func (s *Sweeper) Sweep(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	found, err := s.candidates(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	s.mu.Lock()
	seen := s.firstSeen
	s.firstSeen = make(map[string]time.Time, len(found))
	for id := range found {
		if t, ok := seen[id]; ok {
			s.firstSeen[id] = t
		} else {
			s.firstSeen[id] = now
		}
	}
	s.mu.Unlock()

	counts := map[Ownership]int{}
	var csiDriver *storagev1.CSIDriver
	for id, o := range found {
		first := s.firstSeen[id]
		action := DecideOrphan(s.o.Policy, o.mark, first, now, s.o.MinAge)
		logger := logger.WithValues("volume", id, "name", o.name, "mark", o.mark, "firstSeen", first)
		if action == Watch {
			logger.V(4).Info("Volume accounted for by nothing; waiting for the next sweep")
			continue
		}
		counts[o.mark]++
		logger.Info("Orphan volume")
		if csiDriver == nil {
			if csiDriver = s.csiDriver(ctx); csiDriver == nil {
				csiDriver = &storagev1.CSIDriver{} // none: record nothing
			}
		}
		s.event(csiDriver, v1.EventTypeWarning, fmt.Sprintf("backend volume %s (name %s) of driver %s is tracked by no PV and no claim; %s",
			id, o.name, s.p.o.Driver.DriverName(), s.fate(o.mark)))
		if action != Delete {
			continue
		}
		if err := s.deleteOne(ctx, id, o.name); err != nil {
			logger.Error(err, "Deleting an orphan volume")
			continue
		}
		s.event(csiDriver, v1.EventTypeNormal, fmt.Sprintf("deleted orphan backend volume %s (name %s), orphaned since %s", id, o.name, first.Format(time.RFC3339)))
	}
	for _, m := range allOwnerships {
		s.orphans.WithLabelValues(string(m)).Set(float64(counts[m]))
	}
	return ctx.Err()
}

// fate says in an event what the sweep does with an orphan of a mark.
func (s *Sweeper) fate(mark Ownership) string {
	if s.o.Policy != OrphanDelete {
		return "reported only (--orphan-policy=report)"
	}
	switch mark {
	case OwnedDelete:
		return fmt.Sprintf("it carries this cluster's mark for a Delete class and is deleted once orphaned for %s", s.o.MinAge)
	case OwnedRetain:
		return "it was made for a class that retains its volumes, so it is kept (reported only)"
	case OtherCluster:
		return "another cluster's mark: not deleted"
	}
	return fmt.Sprintf("no %s mark of this cluster: not provably ours, not deleted", OwnerKey)
}

// deleteOne re-checks one candidate on fresh reads and deletes it. With
// whole claim UIDs in names it holds the claim's provisioning lock, so no
// Provision of that claim in this process runs meanwhile.
func (s *Sweeper) deleteOne(ctx context.Context, id, name string) error {
	logger := klog.FromContext(ctx)
	if uid, ok := s.claimUID(name); ok {
		defer s.p.locks.lock(uid)()
	}
	if by := s.accountedFor(ctx, id, name); by != "" {
		logger.Info("An orphan is accounted for on the re-check; not deleting it", "volume", id, "by", by)
		return nil
	}
	if _, err := s.p.o.Driver.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		return err
	}
	s.deleted.Inc()
	logger.Info("Deleted an orphan volume", "volume", id, "name", name)
	return nil
}

// claimUID is the claim UID in a volume name, when names hold whole UIDs.
func (s *Sweeper) claimUID(name string) (string, bool) {
	r := s.p.o.Request
	if r.VolumeNameUUIDLen > 0 {
		return "", false
	}
	return strings.CutPrefix(name, r.VolumeNamePrefix+"-")
}

// accountedFor re-checks one volume right before its deletion: the caches
// again (claims first), then the PV of its name from the API server. It
// returns what accounts for it, or "" for nothing. A claim is not read
// from the API server: there is no reading a claim by UID, and a claim
// that the cache has not shown for MinAge cannot come back (UIDs are not
// reused); a claim that is in the cache accounts for the volume already.
func (s *Sweeper) accountedFor(ctx context.Context, id, name string) string {
	a, err := s.account(ctx)
	if err != nil {
		return "an unreadable cache: " + err.Error()
	}
	if by := a.tracks(id, name); by != "" {
		return by
	}
	switch _, err := s.p.o.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{}); {
	case err == nil:
		return "PV " + name
	case !apierrors.IsNotFound(err):
		return "an unreadable PV: " + err.Error()
	}
	return ""
}

// accounting is what the API says tracks volumes: volume names (of claims,
// their in-flight records, and PVs) and this driver's PV handles.
type accounting struct {
	names   map[string]string // volume name to what names it
	handles map[string]string // volume ID to the PV
}

func (a accounting) tracks(id, name string) string {
	if by, ok := a.handles[id]; ok {
		return by
	}
	return a.names[name]
}

// accountClaims adds what claims account for to a: the volume each claim
// would be provisioned under (while a claim exists, a CreateVolume of that
// name may yet come), and the volume its in-flight record names. It is
// pure.
func (a accounting) accountClaims(claims []*v1.PersistentVolumeClaim, r RequestOptions) {
	for _, c := range claims {
		by := "claim " + klog.KObj(c).String()
		a.names[VolumeName(r.VolumeNamePrefix, string(c.UID), r.VolumeNameUUIDLen)] = by
		if _, name, ok := inflight.Volume(c); ok {
			a.names[name] = by + " (in flight)"
		}
	}
}

// accountVolumes adds what PVs account for to a: every PV's name, and the
// handle of each PV of driver. It is pure.
func (a accounting) accountVolumes(pvs []*v1.PersistentVolume, driver string) {
	for _, pv := range pvs {
		by := "PV " + pv.Name
		a.names[pv.Name] = by
		if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == driver {
			a.handles[pv.Spec.CSI.VolumeHandle] = by
		}
	}
}

// account reads the caches: claims before PVs. A volume's claim keeps its
// in-flight record until the volume's PV is saved, so a hand-off between
// the two reads shows as the record, or as the PV; read the other way
// round, it could show as neither.
func (s *Sweeper) account(ctx context.Context) (accounting, error) {
	a := accounting{names: map[string]string{}, handles: map[string]string{}}
	claims, err := s.o.Claims.List(labels.Everything())
	if err != nil {
		return a, fmt.Errorf("listing claims: %w", err)
	}
	a.accountClaims(claims, s.p.o.Request)
	if s.hook != nil {
		s.hook()
	}
	pvs, err := s.o.Volumes.List(labels.Everything())
	if err != nil {
		return a, fmt.Errorf("listing PVs: %w", err)
	}
	a.accountVolumes(pvs, s.p.o.Driver.DriverName())
	klog.FromContext(ctx).V(5).Info("Accounted volumes", "claims", len(claims), "pvs", len(pvs))
	return a, nil
}

// candidates lists the driver's volumes that look like ours and that no PV
// and no claim accounts for. The driver is listed first, then the caches:
// a volume that exists was recorded on its claim before it was made.
func (s *Sweeper) candidates(ctx context.Context) (map[string]orphan, error) {
	lister := s.p.o.Driver.(ListingDriver)
	ours := s.ourName()
	cluster := s.p.o.Request.Owner
	out := map[string]orphan{}
	token := ""
	for {
		resp, err := lister.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: token})
		if err != nil {
			return nil, fmt.Errorf("ListVolumes: %w", err)
		}
		for _, e := range resp.Entries {
			vol := e.GetVolume()
			if name := volumeName(vol, ours); name != "" {
				out[vol.GetVolumeId()] = orphan{name: name, mark: ownershipOf(vol.GetVolumeContext(), cluster)}
			}
		}
		if token = resp.NextToken; token == "" {
			break
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	a, err := s.account(ctx)
	if err != nil {
		return nil, err
	}
	for id, o := range out {
		if a.tracks(id, o.name) != "" {
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

// csiDriver reads the driver's CSIDriver object, the one thing in the API
// that stands for the backend, for the sweep's events; nil when there is
// none or no recorder.
func (s *Sweeper) csiDriver(ctx context.Context) *storagev1.CSIDriver {
	if s.o.Recorder == nil {
		return nil
	}
	d, err := s.p.o.Client.StorageV1().CSIDrivers().Get(ctx, s.p.o.Driver.DriverName(), metav1.GetOptions{})
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
