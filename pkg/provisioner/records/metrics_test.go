package records

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/pkg/inflight"
)

// recordClaim is a claim with uid carrying a record of driver, on node
// when node is not empty.
func recordClaim(uid, driver, node string) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid)}}
	inflight.Record(c, driver, "pvc-"+uid)
	if node != "" {
		c.Annotations[inflight.AnnNode] = node
	}
	return c
}

func TestOwnsRecord(t *testing.T) {
	older := recordClaim("a", "", "") // a record of an older tether names no driver
	delete(older.Annotations, inflight.AnnDriver)
	for _, tc := range []struct {
		name         string
		claim        *v1.PersistentVolumeClaim
		driver, node string
		want         bool
	}{
		{"no record", &v1.PersistentVolumeClaim{}, "d", "", false},
		{"ours, centralized", recordClaim("a", "d", ""), "d", "", true},
		{"another driver's", recordClaim("a", "other", ""), "d", "", false},
		{"names no driver", older, "d", "", true},
		{"ours, this node", recordClaim("a", "d", "n1"), "d", "n1", true},
		{"ours, another node", recordClaim("a", "d", "n2"), "d", "n1", false},
		{"ours, no node, node mode", recordClaim("a", "d", ""), "d", "n1", false},
		{"ours, a node's, centralized", recordClaim("a", "d", "n2"), "d", "", true},
	} {
		if got := ownsRecord(tc.claim, tc.driver, tc.node); got != tc.want {
			t.Errorf("%s: ownsRecord = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOldestSince(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		since  map[types.UID]time.Time
		want   time.Time
		wantOK bool
	}{
		{nil, time.Time{}, false},
		{map[types.UID]time.Time{"a": t0}, t0, true},
		{map[types.UID]time.Time{"a": t0.Add(time.Minute), "b": t0, "c": t0.Add(time.Hour)}, t0, true},
	} {
		got, ok := oldestSince(tc.since)
		if !got.Equal(tc.want) || ok != tc.wantOK {
			t.Errorf("oldestSince(%v) = %v, %v; want %v, %v", tc.since, got, ok, tc.want, tc.wantOK)
		}
	}
}

// TestInFlightMetrics follows records appearing, changing hands and going,
// and reads the gauges as a scrape would.
func TestInFlightMetrics(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &Metrics{driver: "d", node: "n1", now: func() time.Time { return now }, since: map[types.UID]time.Time{}, unread: map[types.UID]bool{}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	check := func(step string, want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
			t.Errorf("%s: %v", step, err)
		}
	}
	gaugesUnread := func(n int, age string, unread int) string {
		return `
# HELP tether_provisioner_inflight_oldest_record_age_seconds Time since this process first saw the oldest of its in-flight records (0 with none); a restart starts counting again.
# TYPE tether_provisioner_inflight_oldest_record_age_seconds gauge
tether_provisioner_inflight_oldest_record_age_seconds ` + age + `
# HELP tether_provisioner_inflight_records Claims that carry this provisioner's in-flight record: a volume may exist for them that no PV tracks yet.
# TYPE tether_provisioner_inflight_records gauge
tether_provisioner_inflight_records ` + strconv.Itoa(n) + `
# HELP tether_provisioner_inflight_records_unread Of those records, the ones of a format this provisioner does not read: left as they are for a provisioner that reads them (docs/upgrade.md).
# TYPE tether_provisioner_inflight_records_unread gauge
tether_provisioner_inflight_records_unread ` + strconv.Itoa(unread) + "\n"
	}
	gauges := func(n int, age string) string { return gaugesUnread(n, age, 0) }
	check("none", gauges(0, "0"))

	m.observe(recordClaim("a", "d", "n1"))
	now = now.Add(10 * time.Second)
	m.observe(recordClaim("b", "d", "n1"))
	m.observe(recordClaim("c", "d", "n2")) // another node's
	now = now.Add(20 * time.Second)
	check("two records", gauges(2, "30"))

	m.observe(recordClaim("a", "d", "n1")) // seen again: keeps its first time
	check("a seen again", gauges(2, "30"))

	settled := recordClaim("a", "d", "n1")
	inflight.Forget(settled)
	m.observe(settled)
	check("a settled", gauges(1, "20"))

	m.forget(cache.DeletedFinalStateUnknown{Key: "ns/b", Obj: recordClaim("b", "d", "n1")})
	check("b deleted", gauges(0, "0"))

	// A record of a format this provisioner does not read counts among
	// its records, and apart; read again in a format it reads, no more.
	newer := recordClaim("e", "d", "n1")
	newer.Annotations[inflight.AnnFormat] = "2"
	m.observe(newer)
	m.observe(func() *v1.PersistentVolumeClaim {
		c := recordClaim("f", "d", "n2")
		c.Annotations[inflight.AnnFormat] = "2"
		return c
	}()) // another node's
	check("an unread record", gaugesUnread(1, "0", 1))
	m.observe(recordClaim("e", "d", "n1"))
	check("read again", gaugesUnread(1, "0", 0))
	newer = recordClaim("e", "d", "n1")
	newer.Annotations[inflight.AnnFormat] = "x"
	m.observe(newer)
	m.forget(newer)
	check("an unread record deleted", gauges(0, "0"))
}
