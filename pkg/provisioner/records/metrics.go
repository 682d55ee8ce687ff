package records

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/pkg/inflight"
)

// The in-flight records (package inflight) this provisioner answers for:
// how many, and how long ago it first saw the oldest. A record is written
// before CreateVolume and goes once the PV is saved (or the volume is known
// not to exist): one that stays means a volume that may exist and that no
// PV tracks yet.
var (
	inFlightRecordsDesc = prometheus.NewDesc("tether_provisioner_inflight_records",
		"Claims that carry this provisioner's in-flight record: a volume may exist for them that no PV tracks yet.", nil, nil)
	inFlightOldestDesc = prometheus.NewDesc("tether_provisioner_inflight_oldest_record_age_seconds",
		"Time since this process first saw the oldest of its in-flight records (0 with none); a restart starts counting again.", nil, nil)
	inFlightUnreadDesc = prometheus.NewDesc("tether_provisioner_inflight_records_unread",
		"Of those records, the ones of a format this provisioner does not read: left as they are for a provisioner that reads them (docs/upgrade.md).", nil, nil)
)

// ownsRecord reports whether a claim carries an in-flight record that a
// provisioner of driver answers for: the record is not another driver's
// (a record of an older tether names none) and, in node-deployment mode
// (node not empty), it names this node.
func ownsRecord(claim *v1.PersistentVolumeClaim, driver, node string) bool {
	if !inflight.Holds(claim) {
		return false
	}
	if d := claim.Annotations[inflight.AnnDriver]; d != "" && d != driver {
		return false
	}
	return node == "" || claim.Annotations[inflight.AnnNode] == node
}

// oldestSince is the earliest of the times, and false with none.
func oldestSince(since map[types.UID]time.Time) (time.Time, bool) {
	var oldest time.Time
	for _, t := range since {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	return oldest, !oldest.IsZero()
}

// Metrics follows the claim informer and reports the in-flight
// records on each scrape. Its informer runs only while this process
// leads, so a stand-by replica reports none.
type Metrics struct {
	driver, node string
	now          func() time.Time

	mu     sync.Mutex
	since  map[types.UID]time.Time // the records this process has seen, by claim
	unread map[types.UID]bool      // those of a format it does not read
}

// RegisterMetrics registers the in-flight gauges on reg, fed by the
// claim informer, for driver and, in node-deployment mode, node.
func RegisterMetrics(reg prometheus.Registerer, claims cache.SharedIndexInformer, driver, node string) (*Metrics, error) {
	m := &Metrics{driver: driver, node: node, now: time.Now, since: map[types.UID]time.Time{}, unread: map[types.UID]bool{}}
	if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.observe,
		UpdateFunc: func(_, obj any) { m.observe(obj) },
		DeleteFunc: m.forget,
	}); err != nil {
		return nil, err
	}
	if err := reg.Register(m); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metrics) observe(obj any) {
	claim, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !ownsRecord(claim, m.driver, m.node) {
		delete(m.since, claim.UID)
		delete(m.unread, claim.UID)
		return
	}
	if inflight.Unread(claim) {
		m.unread[claim.UID] = true
	} else {
		delete(m.unread, claim.UID)
	}
	if _, seen := m.since[claim.UID]; !seen {
		m.since[claim.UID] = m.now()
	}
}

func (m *Metrics) forget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if claim, ok := obj.(*v1.PersistentVolumeClaim); ok {
		m.mu.Lock()
		delete(m.since, claim.UID)
		delete(m.unread, claim.UID)
		m.mu.Unlock()
	}
}

// Describe is prometheus.Collector's.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- inFlightRecordsDesc
	ch <- inFlightOldestDesc
	ch <- inFlightUnreadDesc
}

// Collect is prometheus.Collector's.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	n, unread := len(m.since), len(m.unread)
	oldest, ok := oldestSince(m.since)
	m.mu.Unlock()
	age := 0.0
	if ok {
		age = max(0, m.now().Sub(oldest).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(inFlightRecordsDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(inFlightOldestDesc, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(inFlightUnreadDesc, prometheus.GaugeValue, float64(unread))
}
