package binder

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// The claims the binder (or a provisioner) still owes a volume: Pending,
// not being deleted, and not waiting for a first consumer. Computed from
// the caches on each scrape, by StorageClass.
var (
	pendingClaimsDesc = prometheus.NewDesc("tether_binder_pending_claims",
		"Claims Pending that wait for a volume: not being deleted, and not a WaitForFirstConsumer claim without a selected node; by StorageClass.",
		[]string{"storage_class"}, nil)
	oldestPendingDesc = prometheus.NewDesc("tether_binder_oldest_pending_claim_age_seconds",
		"Age (since its creation) of the oldest claim counted in tether_binder_pending_claims, by StorageClass.",
		[]string{"storage_class"}, nil)
)

// awaitsVolume reports whether a claim is one the binder or a provisioner
// still owes a volume: Pending (or not yet given a phase), not being
// deleted, and not a claim of a WaitForFirstConsumer class that names no
// volume and that no pod has chosen a node for yet (that one waits for its
// user, not for us). class
// is the claim's StorageClass, nil when it has none or it is not known.
func awaitsVolume(claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass) bool {
	if claim.DeletionTimestamp != nil {
		return false
	}
	if p := claim.Status.Phase; p != v1.ClaimPending && p != "" {
		return false
	}
	return claim.Spec.VolumeName != "" || !DelayBinding(class) ||
		metav1.HasAnnotation(claim.ObjectMeta, storagehelpers.AnnSelectedNode)
}

type pendingCollector struct {
	claims  *Store[*v1.PersistentVolumeClaim]
	classes storagelisters.StorageClassLister
	now     func() time.Time
	// serving reports whether the gauges are served now; nil: always.
	serving func() bool
}

// RegisterPendingMetrics registers the gauges of the claims that wait for
// a volume on reg, read from c's caches on each scrape while c leads (Run's
// workers run): a standby's caches are full too (Start), and its gauges
// would repeat the leader's.
func RegisterPendingMetrics(reg prometheus.Registerer, c *Controller) error {
	return reg.Register(&pendingCollector{claims: c.claims, classes: c.classLister, now: time.Now, serving: c.leading.Load})
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingClaimsDesc
	ch <- oldestPendingDesc
}

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	if c.serving != nil && !c.serving() {
		return
	}
	type stat struct {
		n      int
		oldest time.Time
	}
	byClass := map[string]*stat{}
	for _, claim := range c.claims.List() {
		name := storagehelpers.GetPersistentVolumeClaimClass(claim)
		var class *storagev1.StorageClass
		if name != "" {
			class, _ = c.classes.Get(name) // unknown: nil
		}
		if !awaitsVolume(claim, class) {
			continue
		}
		s := byClass[name]
		if s == nil {
			s = &stat{oldest: claim.CreationTimestamp.Time}
			byClass[name] = s
		}
		s.n++
		if claim.CreationTimestamp.Time.Before(s.oldest) {
			s.oldest = claim.CreationTimestamp.Time
		}
	}
	now := c.now()
	for name, s := range byClass {
		ch <- prometheus.MustNewConstMetric(pendingClaimsDesc, prometheus.GaugeValue, float64(s.n), name)
		ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, max(0, now.Sub(s.oldest).Seconds()), name)
	}
}
