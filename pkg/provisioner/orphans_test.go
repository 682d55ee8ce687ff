package provisioner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/tether-csi/tether/pkg/inflight"
)

const (
	thisCluster  = "cluster-a"
	otherCluster = "cluster-b"
)

// listDriver is a CSI driver with ListVolumes (two entries a page) and
// DeleteVolume.
type listDriver struct {
	mu      sync.Mutex
	vols    map[string]*csi.Volume
	deleted []string
}

func (d *listDriver) DriverName() string { return driverNm }

func (d *listDriver) CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return nil, errors.New("not in this test")
}

func (d *listDriver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.vols, req.VolumeId)
	d.deleted = append(d.deleted, req.VolumeId)
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *listDriver) ListVolumes(_ context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := make([]string, 0, len(d.vols))
	for id := range d.vols {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	start := 0
	if req.StartingToken != "" {
		var err error
		if start, err = strconv.Atoi(req.StartingToken); err != nil {
			return nil, err
		}
	}
	resp := &csi.ListVolumesResponse{}
	for i := start; i < len(ids) && i < start+2; i++ {
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{Volume: d.vols[ids[i]]})
	}
	if start+2 < len(ids) {
		resp.NextToken = strconv.Itoa(start + 2)
	}
	return resp, nil
}

func (d *listDriver) deletedIDs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.deleted)
}

// sweepWorld is the API (a fake clientset), the informer caches (fed by
// hand: they agree with the API unless a scenario says otherwise), the
// driver and a sweeper.
type sweepWorld struct {
	t       *testing.T
	client  *fake.Clientset
	claims  cache.Indexer
	pvs     cache.Indexer
	driver  *listDriver
	events  *record.FakeRecorder
	reg     *prometheus.Registry
	s       *Sweeper
	clock   time.Time
	reads   int                 // the sweep's reads of the caches so far
	between func(w *sweepWorld) // run between a read's claims and its PVs
}

func newSweepWorld(t *testing.T, policy OrphanPolicy) *sweepWorld {
	w := &sweepWorld{t: t, client: fake.NewClientset(&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driverNm}}),
		claims: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		pvs:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		driver: &listDriver{vols: map[string]*csi.Volume{}}, events: record.NewFakeRecorder(100),
		reg: prometheus.NewRegistry(), clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := &Provisioner{o: Options{Client: w.client, Driver: w.driver,
		Request: RequestOptions{VolumeNamePrefix: "pvc", VolumeNameUUIDLen: -1, Owner: thisCluster}}}
	s, err := p.NewSweeper(SweepOptions{Policy: policy, MinAge: time.Hour, Interval: time.Minute, Recorder: w.events,
		Registerer: w.reg, Claims: corelisters.NewPersistentVolumeClaimLister(w.claims), Volumes: corelisters.NewPersistentVolumeLister(w.pvs)})
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return w.clock }
	s.hook = func() {
		w.reads++
		if w.between != nil {
			w.between(w)
		}
	}
	w.s = s
	return w
}

// volume adds a backend volume; its ID is its name unless id is set.
func (w *sweepWorld) volume(name, id string, mark map[string]string) {
	if id == "" {
		id = name
	} else {
		mark = withKV(mark, "name", name)
	}
	w.driver.vols[id] = &csi.Volume{VolumeId: id, CapacityBytes: 1 << 30, VolumeContext: mark}
}

func withKV(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range m {
		out[key] = val
	}
	return out
}

// addClaim puts a claim in the API and, unless apiOnly, in the cache.
func (w *sweepWorld) addClaim(c *v1.PersistentVolumeClaim, apiOnly bool) {
	if _, err := w.client.CoreV1().PersistentVolumeClaims(c.Namespace).Create(context.Background(), c, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	if !apiOnly {
		must(w.t, w.claims.Add(c))
	}
}

// addPV puts a PV in the API and, unless apiOnly, in the cache.
func (w *sweepWorld) addPV(pv *v1.PersistentVolume, apiOnly bool) {
	if _, err := w.client.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	if !apiOnly {
		must(w.t, w.pvs.Add(pv))
	}
}

// updateClaim writes a claim to the API and the cache.
func (w *sweepWorld) updateClaim(c *v1.PersistentVolumeClaim) {
	if _, err := w.client.CoreV1().PersistentVolumeClaims(c.Namespace).Update(context.Background(), c, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	must(w.t, w.claims.Update(c))
}

// deleteClaim removes a claim from the API and the cache.
func (w *sweepWorld) deleteClaim(c *v1.PersistentVolumeClaim) {
	if err := w.client.CoreV1().PersistentVolumeClaims(c.Namespace).Delete(context.Background(), c.Name, metav1.DeleteOptions{}); err != nil {
		w.t.Fatal(err)
	}
	must(w.t, w.claims.Delete(c))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sweep runs one sweep at the clock, then moves the clock on by step.
func (w *sweepWorld) sweep(step time.Duration) {
	w.t.Helper()
	_, ctx := ktesting.NewTestContext(w.t)
	if err := w.s.Sweep(ctx); err != nil {
		w.t.Fatalf("Sweep: %v", err)
	}
	w.clock = w.clock.Add(step)
}

// recorded drains the events recorded so far.
func (w *sweepWorld) recorded() []string {
	var out []string
	for {
		select {
		case e := <-w.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// gauge reads tether_provisioner_orphan_volumes{mark}.
func (w *sweepWorld) gauge(mark Ownership) float64 {
	families, err := w.reg.Gather()
	must(w.t, err)
	for _, f := range families {
		if f.GetName() != "tether_provisioner_orphan_volumes" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "mark" && l.GetValue() == string(mark) {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	w.t.Fatalf("no gauge for mark %q", mark)
	return 0
}

// Names and builders for the scenarios.
const (
	uidA = "0a1b2c3d-0000-4000-8000-00000000000a"
	uidB = "0a1b2c3d-0000-4000-8000-00000000000b"
)

var (
	volA = "pvc-" + uidA
	volB = "pvc-" + uidB
)

func ownerMark(cluster string, reclaim v1.PersistentVolumeReclaimPolicy) map[string]string {
	return map[string]string{OwnerKey: OwnerMark(cluster, reclaim)}
}

var (
	oursDelete = ownerMark(thisCluster, v1.PersistentVolumeReclaimDelete)
	oursRetain = ownerMark(thisCluster, v1.PersistentVolumeReclaimRetain)
)

// sweepClaim is claim ns/name with uid; record names the volume of its
// in-flight record ("" for none; "-" for a record of an older tether,
// the finalizer alone).
func sweepClaim(name, uid, record string) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID(uid)}}
	switch record {
	case "":
	case "-":
		c.Finalizers = []string{inflight.Finalizer}
	default:
		inflight.Record(c, driverNm, record)
	}
	return c
}

// sweepPV is a PV of name for the handle of driver.
func sweepPV(name, driver, handle string) *v1.PersistentVolume {
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{
			CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}}}}
}

// TestSweepScenarios runs two sweeps two hours apart (MinAge is one hour)
// over a scenario and checks what was deleted and reported. The sweep
// takes a volume for an orphan only when it is seen so on two sweeps, and
// deletes only one that carries this cluster's mark for a Delete class.
// savedBetweenReads is the hand-off falling between the sweep's first two
// reads: claim a's PV is saved and its record dropped (and the claim then
// deleted, when deleted is true).
func savedBetweenReads(deleted bool) func(*sweepWorld) {
	return func(w *sweepWorld) {
		if w.reads != 1 {
			return
		}
		w.addPV(sweepPV(volA, driverNm, volA), false)
		c, _, _ := w.claims.GetByKey(testNS + "/a")
		settled := c.(*v1.PersistentVolumeClaim).DeepCopy()
		inflight.Forget(settled)
		w.updateClaim(settled)
		if deleted {
			w.deleteClaim(settled)
		}
	}
}

func TestSweepScenarios(t *testing.T) {
	type scenario struct {
		name   string
		policy OrphanPolicy
		// setup makes the world before the first sweep; between runs
		// between the claim and PV reads of the caches.
		setup   func(w *sweepWorld)
		between func(w *sweepWorld)
		// step is the time between the sweeps (2h unless set).
		step time.Duration
		// sweeps: 2 unless set.
		sweeps      int
		wantDeleted []string
		// wantReported are the volume IDs with an OrphanVolume warning on
		// some sweep; wantGauge the gauge by mark after the last.
		wantReported []string
		wantGauge    map[Ownership]float64
	}
	tests := []scenario{
		// Defect: another cluster's volume on a shared backend, made with
		// the default prefix, was deleted after an hour.
		{name: "another cluster's unmarked volume is reported, not deleted", policy: OrphanDelete,
			setup:        func(w *sweepWorld) { w.volume(volA, "", nil) },
			wantReported: []string{volA}, wantGauge: map[Ownership]float64{Unmarked: 1}},
		{name: "a volume with another cluster's mark is reported, not deleted", policy: OrphanDelete,
			setup:        func(w *sweepWorld) { w.volume(volA, "", ownerMark(otherCluster, v1.PersistentVolumeReclaimDelete)) },
			wantReported: []string{volA}, wantGauge: map[Ownership]float64{OtherCluster: 1}},
		// Defect: an admin keeps a Retain class's disk by deleting its
		// Released PV; the sweep deleted the disk an hour later.
		{name: "a Retain volume whose PV the admin deleted is kept", policy: OrphanDelete, sweeps: 3,
			setup: func(w *sweepWorld) {
				w.volume(volA, "", oursRetain)
				pv := sweepPV(volA, driverNm, volA)
				pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
				pv.Status.Phase = v1.VolumeReleased
				w.addPV(pv, false)
			},
			between: func(w *sweepWorld) {
				if w.reads == 1 {
					must(w.t, w.client.CoreV1().PersistentVolumes().Delete(context.Background(), volA, metav1.DeleteOptions{}))
					must(w.t, w.pvs.Delete(sweepPV(volA, driverNm, volA)))
				}
			},
			wantReported: []string{volA}, wantGauge: map[Ownership]float64{OwnedRetain: 1}},
		{name: "a malformed mark is no mark", policy: OrphanDelete,
			setup:        func(w *sweepWorld) { w.volume(volA, "", map[string]string{OwnerKey: thisCluster}) },
			wantReported: []string{volA}, wantGauge: map[Ownership]float64{Unmarked: 1}},
		{name: "our Delete orphan past MinAge, seen on two sweeps, is deleted", policy: OrphanDelete,
			setup:       func(w *sweepWorld) { w.volume(volA, "", oursDelete) },
			wantDeleted: []string{volA}, wantReported: []string{volA}, wantGauge: map[Ownership]float64{OwnedDelete: 1}},
		{name: "our Delete orphan with an opaque ID is deleted by its ID", policy: OrphanDelete,
			setup:       func(w *sweepWorld) { w.volume(volA, "vol-17", oursDelete) },
			wantDeleted: []string{"vol-17"}, wantReported: []string{"vol-17"}, wantGauge: map[Ownership]float64{OwnedDelete: 1}},
		{name: "our Delete orphan under the report policy is reported only", policy: OrphanReport,
			setup:        func(w *sweepWorld) { w.volume(volA, "", oursDelete) },
			wantReported: []string{volA}, wantGauge: map[Ownership]float64{OwnedDelete: 1}},
		{name: "our Delete orphan younger than MinAge is reported only", policy: OrphanDelete, step: 30 * time.Minute,
			setup:        func(w *sweepWorld) { w.volume(volA, "", oursDelete) },
			wantReported: []string{volA}, wantGauge: map[Ownership]float64{OwnedDelete: 1}},
		{name: "a volume seen orphaned once is neither reported nor deleted", policy: OrphanDelete, sweeps: 1,
			setup: func(w *sweepWorld) { w.volume(volA, "", oursDelete) }},
		{name: "volumes not named like ours are ignored", policy: OrphanDelete,
			setup: func(w *sweepWorld) { w.volume("hand-made", "", oursDelete); w.volume("pvc-xyz", "", oursDelete) }},
		{name: "a PV of the volume's name accounts for it", policy: OrphanDelete,
			setup: func(w *sweepWorld) { w.volume(volA, "", oursDelete); w.addPV(sweepPV(volA, "other.csi", "h"), false) }},
		{name: "a PV of this driver with the volume's handle accounts for it", policy: OrphanDelete,
			setup: func(w *sweepWorld) {
				w.volume(volA, "vol-17", oursDelete)
				w.addPV(sweepPV("kept", driverNm, "vol-17"), false)
			}},
		{name: "a PV of another driver with the volume's handle does not", policy: OrphanDelete,
			setup: func(w *sweepWorld) {
				w.volume(volA, "vol-17", oursDelete)
				w.addPV(sweepPV("theirs", "other.csi", "vol-17"), false)
			},
			wantDeleted: []string{"vol-17"}, wantReported: []string{"vol-17"}, wantGauge: map[Ownership]float64{OwnedDelete: 1}},
		{name: "a volume whose claim holds the in-flight record is no candidate", policy: OrphanDelete,
			setup: func(w *sweepWorld) { w.volume(volA, "", oursDelete); w.addClaim(sweepClaim("a", uidA, volA), false) }},
		{name: "a record naming a volume of another name (older naming options) accounts for it", policy: OrphanDelete,
			setup: func(w *sweepWorld) { w.volume(volA, "", oursDelete); w.addClaim(sweepClaim("b", uidB, volA), false) }},
		{name: "an older tether's record (the finalizer alone) accounts for its claim's volume", policy: OrphanDelete,
			setup: func(w *sweepWorld) { w.volume(volA, "", oursDelete); w.addClaim(sweepClaim("a", uidA, "-"), false) }},
		{name: "a claim being deleted that holds the record", policy: OrphanDelete,
			setup: func(w *sweepWorld) {
				w.volume(volA, "", oursDelete)
				c := sweepClaim("a", uidA, volA)
				c.DeletionTimestamp = &metav1.Time{Time: w.clock}
				w.addClaim(c, false)
			}},
		{name: "a live claim of the volume's name without a record", policy: OrphanDelete,
			setup: func(w *sweepWorld) { w.volume(volA, "", oursDelete); w.addClaim(sweepClaim("a", uidA, ""), false) }},
		// Defect: the PV is saved and then the record dropped; PVs read
		// before claims could see neither, and warn.
		{name: "a volume whose PV appears between the two reads, its claim then deleted", policy: OrphanDelete,
			setup:   func(w *sweepWorld) { w.volume(volA, "", oursDelete); w.addClaim(sweepClaim("a", uidA, volA), false) },
			between: savedBetweenReads(true)},
		{name: "a volume whose PV appears between the two reads, its claim kept", policy: OrphanDelete,
			setup:   func(w *sweepWorld) { w.volume(volA, "", oursDelete); w.addClaim(sweepClaim("a", uidA, volA), false) },
			between: savedBetweenReads(false)},
		// The caches lag the API: the PV is saved just before the
		// re-check and only the API has it.
		{name: "a volume that gets its PV just before the re-check (API only)", policy: OrphanDelete,
			setup: func(w *sweepWorld) { w.volume(volA, "", oursDelete) },
			between: func(w *sweepWorld) {
				if w.reads == 2 {
					w.addPV(sweepPV(volA, driverNm, volA), true)
				}
			},
			wantReported: []string{volA}, wantGauge: map[Ownership]float64{OwnedDelete: 1}},
		{name: "a volume that gets its PV just before the re-check (in the cache)", policy: OrphanDelete,
			setup: func(w *sweepWorld) { w.volume(volA, "", oursDelete) },
			between: func(w *sweepWorld) {
				if w.reads == 3 { // the re-check's read
					w.addPV(sweepPV(volA, driverNm, volA), false)
				}
			},
			wantReported: []string{volA}, wantGauge: map[Ownership]float64{OwnedDelete: 1}},
		{name: "a volume that gets an in-flight claim just before the re-check", policy: OrphanDelete,
			setup: func(w *sweepWorld) { w.volume(volA, "", oursDelete) },
			between: func(w *sweepWorld) {
				if w.reads == 2 {
					w.addClaim(sweepClaim("late", uidB, volA), false)
				}
			},
			wantReported: []string{volA}, wantGauge: map[Ownership]float64{OwnedDelete: 1}},
		{name: "one of several: only our orphan goes", policy: OrphanDelete,
			setup: func(w *sweepWorld) {
				w.volume(volA, "", oursDelete)
				w.volume(volB, "", nil)
				w.volume("pvc-0a1b2c3d-0000-4000-8000-00000000000c", "", oursRetain)
				w.volume("pvc-0a1b2c3d-0000-4000-8000-00000000000d", "", oursDelete)
				w.addPV(sweepPV("pvc-0a1b2c3d-0000-4000-8000-00000000000d", driverNm, "pvc-0a1b2c3d-0000-4000-8000-00000000000d"), false)
			},
			wantDeleted:  []string{volA},
			wantReported: []string{volA, volB, "pvc-0a1b2c3d-0000-4000-8000-00000000000c"},
			wantGauge:    map[Ownership]float64{OwnedDelete: 1, Unmarked: 1, OwnedRetain: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newSweepWorld(t, tt.policy)
			tt.setup(w)
			w.between = tt.between
			step, sweeps := cmpOr(tt.step, 2*time.Hour), cmpOr(tt.sweeps, 2)
			var events []string
			for range sweeps {
				w.sweep(step)
				events = append(events, w.recorded()...)
			}
			if got := w.driver.deletedIDs(); !slices.Equal(got, tt.wantDeleted) {
				t.Errorf("deleted %v, want %v", got, tt.wantDeleted)
			}
			var reported []string
			for _, e := range events {
				if strings.HasPrefix(e, v1.EventTypeWarning+" "+ReasonOrphanVolume+" ") {
					reported = append(reported, strings.Fields(e)[4])
				}
			}
			slices.Sort(reported)
			reported = slices.Compact(reported)
			want := slices.Sorted(slices.Values(tt.wantReported))
			if !slices.Equal(reported, want) {
				t.Errorf("OrphanVolume warnings for %v, want %v; events %q", reported, want, events)
			}
			for _, id := range tt.wantDeleted {
				if !slices.ContainsFunc(events, func(e string) bool {
					return strings.HasPrefix(e, v1.EventTypeNormal+" "+ReasonOrphanVolume+" deleted orphan backend volume "+id+" ")
				}) {
					t.Errorf("no event for the deletion of %s: %q", id, events)
				}
			}
			for _, m := range allOwnerships {
				if got := w.gauge(m); got != tt.wantGauge[m] {
					t.Errorf("gauge{mark=%s} = %v, want %v", m, got, tt.wantGauge[m])
				}
			}
		})
	}
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// TestSweepHandOffNotSuspected: a volume whose PV is saved (and its record
// dropped, and its claim deleted) between the sweep's two reads is not even
// held as a suspect for the next sweep.
func TestSweepHandOffNotSuspected(t *testing.T) {
	w := newSweepWorld(t, OrphanDelete)
	w.volume(volA, "", oursDelete)
	w.addClaim(sweepClaim("a", uidA, volA), false)
	w.between = func(w *sweepWorld) {
		w.addPV(sweepPV(volA, driverNm, volA), false)
		c := sweepClaim("a", uidA, "")
		w.updateClaim(c)
		w.deleteClaim(c)
		w.between = nil
	}
	w.sweep(time.Minute)
	if len(w.s.firstSeen) != 0 {
		t.Errorf("suspects after the hand-off: %v", w.s.firstSeen)
	}
}

// TestSweepForgetsWhatIsAccountedFor: a volume that a PV accounts for
// between sweeps starts over as a suspect when it is orphaned again.
func TestSweepForgetsWhatIsAccountedFor(t *testing.T) {
	w := newSweepWorld(t, OrphanDelete)
	w.volume(volA, "", oursDelete)
	w.sweep(2 * time.Hour)
	pv := sweepPV(volA, driverNm, volA)
	w.addPV(pv, false)
	w.sweep(2 * time.Hour)
	must(t, w.pvs.Delete(pv))
	must(t, w.client.CoreV1().PersistentVolumes().Delete(context.Background(), volA, metav1.DeleteOptions{}))
	w.sweep(2 * time.Hour) // a suspect again, from now
	if d := w.driver.deletedIDs(); len(d) != 0 {
		t.Fatalf("deleted %v on its first sighting since its PV went", d)
	}
	w.sweep(2 * time.Hour)
	if d := w.driver.deletedIDs(); !slices.Equal(d, []string{volA}) {
		t.Errorf("deleted %v, want %v", d, []string{volA})
	}
}

func TestNewSweeperChecks(t *testing.T) {
	claims := corelisters.NewPersistentVolumeClaimLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	pvs := corelisters.NewPersistentVolumeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	ok := SweepOptions{Policy: OrphanDelete, Interval: time.Minute, Claims: claims, Volumes: pvs}
	tests := []struct {
		name    string
		owner   string
		change  func(*SweepOptions)
		wantErr string
	}{
		{name: "delete with a cluster ID", owner: thisCluster},
		{name: "delete without a cluster ID", wantErr: "needs the cluster's ID"},
		{name: "report without a cluster ID", change: func(o *SweepOptions) { o.Policy = OrphanReport }},
		{name: "no listers", owner: thisCluster, change: func(o *SweepOptions) { o.Claims = nil }, wantErr: "listers"},
		{name: "unknown policy", owner: thisCluster, change: func(o *SweepOptions) { o.Policy = "purge" }, wantErr: "report or delete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			if tt.change != nil {
				tt.change(&o)
			}
			p := &Provisioner{o: Options{Driver: &listDriver{}, Request: RequestOptions{VolumeNamePrefix: "pvc", Owner: tt.owner}}}
			_, err := p.NewSweeper(o)
			checkErr(t, err, tt.wantErr)
		})
	}
}

func TestOwnershipOf(t *testing.T) {
	tests := []struct {
		name    string
		context map[string]string
		cluster string
		want    Ownership
	}{
		{"no context", nil, thisCluster, Unmarked},
		{"no mark", map[string]string{"name": volA}, thisCluster, Unmarked},
		{"ours, Delete", oursDelete, thisCluster, OwnedDelete},
		{"ours, Retain", oursRetain, thisCluster, OwnedRetain},
		{"ours, Recycle", ownerMark(thisCluster, v1.PersistentVolumeReclaimRecycle), thisCluster, OwnedRetain},
		{"another cluster's", ownerMark(otherCluster, v1.PersistentVolumeReclaimDelete), thisCluster, OtherCluster},
		{"a prefix of our ID is another cluster", ownerMark("cluster", v1.PersistentVolumeReclaimDelete), thisCluster, OtherCluster},
		{"a cluster ID with slashes", ownerMark("a/b", v1.PersistentVolumeReclaimDelete), "a/b", OwnedDelete},
		{"no policy", map[string]string{OwnerKey: "/" + thisCluster}, thisCluster, Unmarked},
		{"no cluster", map[string]string{OwnerKey: "Delete/"}, thisCluster, Unmarked},
		{"no slash", map[string]string{OwnerKey: thisCluster}, thisCluster, Unmarked},
		{"we have no ID (report policy)", oursDelete, "", Unmarked},
	}
	for _, tt := range tests {
		if got := ownershipOf(tt.context, tt.cluster); got != tt.want {
			t.Errorf("%s: ownershipOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestDecideOrphan(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		policy OrphanPolicy
		mark   Ownership
		age    time.Duration
		want   OrphanAction
	}{
		{OrphanDelete, OwnedDelete, 0, Watch}, // first seen now
		{OrphanDelete, OwnedDelete, time.Minute, Report},
		{OrphanDelete, OwnedDelete, time.Hour, Delete},
		{OrphanDelete, OwnedDelete, 5 * time.Hour, Delete},
		{OrphanReport, OwnedDelete, 5 * time.Hour, Report},
		{OrphanDelete, OwnedRetain, 5 * time.Hour, Report},
		{OrphanDelete, OtherCluster, 5 * time.Hour, Report},
		{OrphanDelete, Unmarked, 5 * time.Hour, Report},
		{OrphanDelete, Unmarked, 0, Watch},
	}
	for _, tt := range tests {
		if got := DecideOrphan(tt.policy, tt.mark, t0, t0.Add(tt.age), time.Hour); got != tt.want {
			t.Errorf("DecideOrphan(%s, %s, age %s) = %v, want %v", tt.policy, tt.mark, tt.age, got, tt.want)
		}
	}
}

func TestAccounting(t *testing.T) {
	a := accounting{names: map[string]string{}, handles: map[string]string{}}
	a.accountClaims([]*v1.PersistentVolumeClaim{sweepClaim("a", uidA, ""), sweepClaim("b", uidB, "pvc-renamed")},
		RequestOptions{VolumeNamePrefix: "pvc", VolumeNameUUIDLen: 8})
	a.accountVolumes([]*v1.PersistentVolume{sweepPV("p1", driverNm, "h1"), sweepPV("p2", "other.csi", "h2"), {ObjectMeta: metav1.ObjectMeta{Name: "nfs"}}}, driverNm)
	tests := []struct {
		id, name string
		tracked  bool
	}{
		{"x", "pvc-0a1b2c3d", true}, // claim a's name, cut to 8
		{"x", "pvc-renamed", true},  // claim b's record
		{"x", "pvc-" + uidA, false}, // the uncut name is not claim a's
		{"h1", "x", true},
		{"h2", "x", false}, // another driver's handle
		{"x", "p2", true},  // a PV's name
		{"x", "nfs", true},
	}
	for _, tt := range tests {
		if got := a.tracks(tt.id, tt.name) != ""; got != tt.tracked {
			t.Errorf("tracks(%q, %q) = %v, want %v", tt.id, tt.name, got, tt.tracked)
		}
	}
	if by := a.tracks("x", "pvc-renamed"); by != fmt.Sprintf("claim %s/b (in flight)", testNS) {
		t.Errorf("tracks says %q", by)
	}
}
