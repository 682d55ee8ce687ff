package binder

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

// Metrics are the binder's Prometheus metrics. The pv_collector_* gauges
// have kube-controller-manager's names and labels, so its dashboards work.
type Metrics struct {
	operations *prometheus.HistogramVec
	bindTime   prometheus.Histogram
	unread     prometheus.Counter
	foreign    *prometheus.CounterVec
	collector  *countCollector
}

// NewMetrics registers the binder's metrics on reg. The gauges are computed
// from the caches on each scrape.
func NewMetrics(reg prometheus.Registerer, volumes *Index, claims *Store[*v1.PersistentVolumeClaim]) *Metrics {
	m := &Metrics{
		operations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tether_binder_operation_duration_seconds",
			Help:    "Duration of one claim or volume sync, by operation and result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"operation", "result"}),
		bindTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tether_binder_claim_bind_seconds",
			Help:    "Time from a claim's creation to its binding by this binder.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
		unread: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tether_binder_inflight_records_unread_total",
			Help: "Bind writes that left a claim's in-flight record as it was, because its format is one this binder does not read (docs/upgrade.md).",
		}),
		foreign: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tether_binder_foreign_binder_writes_total",
			Help: "Writes of another PV binder (kube-controller-manager's) to a binding field of a claim or PV, seen by the leading binder since it started (docs/binder.md).",
		}, []string{"kind", "manager"}),
		collector: &countCollector{volumes: volumes, claims: claims},
	}
	// Each series starts at 0, so that an alert on its increase sees the
	// first write.
	for _, kind := range []string{"PersistentVolumeClaim", "PersistentVolume"} {
		for _, manager := range ForeignBinders {
			m.foreign.WithLabelValues(kind, manager)
		}
	}
	if reg != nil {
		reg.MustRegister(m.operations, m.bindTime, m.unread, m.foreign, m.collector)
	}
	return m
}

func (m *Metrics) observe(op string, start time.Time, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.operations.WithLabelValues(op, result).Observe(time.Since(start).Seconds())
}

func (m *Metrics) observeUnreadRecord() {
	if m != nil {
		m.unread.Inc()
	}
}

func (m *Metrics) observeForeign(kind, manager string) {
	if m != nil {
		m.foreign.WithLabelValues(kind, manager).Inc()
	}
}

func (m *Metrics) observeBound(claim *v1.PersistentVolumeClaim) {
	if m == nil {
		return
	}
	m.bindTime.Observe(time.Since(claim.CreationTimestamp.Time).Seconds())
}

var (
	totalPVDesc = prometheus.NewDesc("pv_collector_total_pv_count",
		"Gauge measuring total number of persistent volumes", []string{"plugin_name", "volume_mode"}, nil)
	boundPVDesc = prometheus.NewDesc("pv_collector_bound_pv_count",
		"Gauge measuring number of persistent volume currently bound", []string{"storage_class"}, nil)
	unboundPVDesc = prometheus.NewDesc("pv_collector_unbound_pv_count",
		"Gauge measuring number of persistent volume currently unbound", []string{"storage_class"}, nil)
	boundPVCDesc = prometheus.NewDesc("pv_collector_bound_pvc_count",
		"Gauge measuring number of persistent volume claim currently bound", []string{"namespace", "storage_class", "volume_attributes_class"}, nil)
	unboundPVCDesc = prometheus.NewDesc("pv_collector_unbound_pvc_count",
		"Gauge measuring number of persistent volume claim currently unbound", []string{"namespace", "storage_class", "volume_attributes_class"}, nil)
)

type countCollector struct {
	volumes *Index
	claims  *Store[*v1.PersistentVolumeClaim]
	// serving, if set, reports whether the gauges are served now (the
	// Controller's: while it leads).
	serving func() bool
}

func (c *countCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{totalPVDesc, boundPVDesc, unboundPVDesc, boundPVCDesc, unboundPVCDesc} {
		ch <- d
	}
}

func (c *countCollector) Collect(ch chan<- prometheus.Metric) {
	if c.serving != nil && !c.serving() {
		return
	}
	type pvcDims struct{ ns, class, vac string }
	total := map[[2]string]int{}
	bound, unbound := map[string]int{}, map[string]int{}
	for _, pv := range c.volumes.List() {
		plugin := "N/A"
		if pv.Spec.CSI != nil {
			plugin = "kubernetes.io/csi:" + pv.Spec.CSI.Driver
		}
		total[[2]string{plugin, string(volumeModeOf(pv.Spec.VolumeMode))}]++
		class := storagehelpers.GetPersistentVolumeClass(pv)
		if pv.Status.Phase == v1.VolumeBound {
			bound[class]++
		} else {
			unbound[class]++
		}
	}
	boundC, unboundC := map[pvcDims]int{}, map[pvcDims]int{}
	for _, pvc := range c.claims.List() {
		d := pvcDims{pvc.Namespace, storagehelpers.GetPersistentVolumeClaimClass(pvc), ptr.Deref(pvc.Spec.VolumeAttributesClassName, "")}
		if pvc.Status.Phase == v1.ClaimBound {
			boundC[d]++
		} else {
			unboundC[d]++
		}
	}
	for k, n := range total {
		ch <- prometheus.MustNewConstMetric(totalPVDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for class, n := range bound {
		ch <- prometheus.MustNewConstMetric(boundPVDesc, prometheus.GaugeValue, float64(n), class)
	}
	for class, n := range unbound {
		ch <- prometheus.MustNewConstMetric(unboundPVDesc, prometheus.GaugeValue, float64(n), class)
	}
	for d, n := range boundC {
		ch <- prometheus.MustNewConstMetric(boundPVCDesc, prometheus.GaugeValue, float64(n), d.ns, d.class, d.vac)
	}
	for d, n := range unboundC {
		ch <- prometheus.MustNewConstMetric(unboundPVCDesc, prometheus.GaugeValue, float64(n), d.ns, d.class, d.vac)
	}
}
