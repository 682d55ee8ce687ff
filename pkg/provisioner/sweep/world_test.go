package sweep

import (
	"context"
	"errors"
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
	"github.com/tether-csi/tether/pkg/provisioner/claimlock"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// The world the sweep's tests run in.

const (
	thisCluster  = "cluster-a"
	otherCluster = "cluster-b"
	driverNm     = "csi.tether.dev"
	testNS       = "apps"
)

// listDriver is a CSI driver with ListVolumes (two entries a page) and
// DeleteVolume.
type listDriver struct {
	mu      sync.Mutex
	name    string // driverNm unless set
	vols    map[string]*csi.Volume
	deleted []string
}

func (d *listDriver) DriverName() string { return cmpOr(d.name, driverNm) }

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

// pvEvents stands for the PV informer: the world hands each PV it adds
// to the cache, or deletes from it, to the handlers (the sweeper's).
type pvEvents struct {
	handlers []cache.ResourceEventHandler
	stopped  bool
	synced   bool
}

func (e *pvEvents) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	e.handlers = append(e.handlers, h)
	return registration{e: e}, nil
}

func (e *pvEvents) IsStopped() bool { return e.stopped }

type registration struct {
	cache.ResourceEventHandlerRegistration // only HasSynced is called
	e                                      *pvEvents
}

func (r registration) HasSynced() bool { return r.e.synced }

// sweepWorld is the API (a fake clientset), the informer caches (fed by
// hand: they agree with the API unless a scenario says otherwise), the
// driver and a sweeper.
type sweepWorld struct {
	t       *testing.T
	client  *fake.Clientset
	claims  cache.Indexer
	pvs     cache.Indexer
	events  *pvEvents
	driver  *listDriver
	rec     *record.FakeRecorder
	reg     *prometheus.Registry
	s       *Sweeper
	clock   time.Time
	reads   int                 // the sweep's reads of the caches so far
	between func(w *sweepWorld) // run between a read's claims and its PVs
	saving  map[string]bool     // PVs by name that the library may still save
}

// newSweepWorld is an empty world; driver, when not "", names the
// driver (driverNm otherwise).
func newSweepWorld(t *testing.T, policy Policy, driver ...string) *sweepWorld {
	name := driverNm
	if len(driver) > 0 {
		name = driver[0]
	}
	w := &sweepWorld{t: t, client: fake.NewClientset(&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name}}),
		claims: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		pvs:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		events: &pvEvents{synced: true},
		driver: &listDriver{name: name, vols: map[string]*csi.Volume{}}, rec: record.NewFakeRecorder(100),
		reg: prometheus.NewRegistry(), clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, err := w.newSweeper(Options{Client: w.client, Driver: w.driver, Locks: &claimlock.Set{},
		Request: request.Options{VolumeNamePrefix: "pvc", VolumeNameUUIDLen: -1, Owner: thisCluster},
		Policy:  policy, MinAge: time.Hour, Interval: time.Minute, Recorder: w.rec, Registerer: w.reg,
		Claims: corelisters.NewPersistentVolumeClaimLister(w.claims), Volumes: corelisters.NewPersistentVolumeLister(w.pvs),
		Clock: func() time.Time { return w.clock }, SavePending: func(name string) bool { return w.saving[name] }})
	if err != nil {
		t.Fatal(err)
	}
	s.hook = func() {
		w.reads++
		if w.between != nil {
			w.between(w)
		}
	}
	w.s = s
	return w
}

// newSweeper makes the world's sweeper, its PV informer the world's.
func (w *sweepWorld) newSweeper(o Options) (*Sweeper, error) {
	o.VolumeEvents = w.events
	_, ctx := ktesting.NewTestContext(w.t)
	return New(ctx, o)
}

// baseline runs the sweeps that make the sweeper's first listings: the
// volumes made afterwards were made while it watched.
func (w *sweepWorld) baseline() {
	for range baselineListings {
		w.sweep(time.Minute)
	}
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
		for _, h := range w.events.handlers {
			h.OnAdd(pv, false)
		}
	}
}

// updatePV writes a PV to the API and the cache.
func (w *sweepWorld) updatePV(pv *v1.PersistentVolume) {
	old, _, _ := w.pvs.Get(pv)
	if _, err := w.client.CoreV1().PersistentVolumes().Update(context.Background(), pv, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	must(w.t, w.pvs.Update(pv))
	for _, h := range w.events.handlers {
		h.OnUpdate(old, pv)
	}
}

// deletePV removes a PV from the API and the cache.
func (w *sweepWorld) deletePV(pv *v1.PersistentVolume) {
	if err := w.client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{}); err != nil {
		w.t.Fatal(err)
	}
	must(w.t, w.pvs.Delete(pv))
	for _, h := range w.events.handlers {
		h.OnDelete(pv)
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

// checkErr fails unless err matches want: "" for no error, else a
// substring of the message.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

// drain returns the events a fake recorder holds, emptying it.
func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case ev := <-rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
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
func (w *sweepWorld) recorded() []string { return drain(w.rec) }

// gauge sums tether_provisioner_orphan_volumes{mark} over its other
// labels.
func (w *sweepWorld) gauge(mark Ownership) float64 {
	families, err := w.reg.Gather()
	must(w.t, err)
	sum, found := 0.0, false
	for _, f := range families {
		if f.GetName() != "tether_provisioner_orphan_volumes" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "mark" && l.GetValue() == string(mark) {
					sum, found = sum+m.GetGauge().GetValue(), true
				}
			}
		}
	}
	if !found {
		w.t.Fatalf("no gauge for mark %q", mark)
	}
	return sum
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
	return map[string]string{request.OwnerKey: request.OwnerMark(cluster, reclaim)}
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

// kept is why the sweep keeps each volume of its report list, by ID.
func (w *sweepWorld) kept() map[string]string {
	out := map[string]string{}
	for _, r := range w.s.Orphans() {
		out[cmpOr(r.VolumeID, r.Name)] = string(r.Reason)
	}
	return out
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// gaugeOf reads tether_provisioner_orphan_volumes{mark, reason}.
func (w *sweepWorld) gaugeOf(mark Ownership, reason KeepReason) float64 {
	families, err := w.reg.Gather()
	must(w.t, err)
	for _, f := range families {
		if f.GetName() != "tether_provisioner_orphan_volumes" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["mark"] == string(mark) && labels["reason"] == string(reason) {
				return m.GetGauge().GetValue()
			}
		}
	}
	w.t.Fatalf("no gauge for mark %q, reason %q", mark, reason)
	return 0
}
