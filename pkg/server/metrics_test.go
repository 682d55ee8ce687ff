package server

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

func TestClientGoFamily(t *testing.T) {
	for name, want := range map[string]bool{
		"workqueue_depth":                           true,
		"rest_client_request_duration_seconds":      true,
		"rest_client_rate_limiter_duration_seconds": true,
		"leader_election_master_status":             true,
		"go_goroutines":                             false, // NewRegistry's own
		"process_cpu_seconds_total":                 false,
		"registered_metrics_total":                  false, // component-base's registry's
		"workqueue":                                 false,
	} {
		if got := clientGoFamily(name); got != want {
			t.Errorf("clientGoFamily(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestGathererServesClientGo: a named workqueue's metrics are served beside
// the registry's, with no family twice.
func TestGathererServesClientGo(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "metrics-test"})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	families, err := Gatherer(NewRegistry()).Gather()
	if err != nil {
		t.Fatal(err) // a family served twice is an error
	}
	names := map[string]bool{}
	adds := -1.0
	for _, f := range families {
		names[f.GetName()] = true
		if f.GetName() != "workqueue_adds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "metrics-test" {
					adds = m.GetCounter().GetValue()
				}
			}
		}
	}
	if adds != 2 {
		t.Errorf("workqueue_adds_total{name=\"metrics-test\"} = %v, want 2", adds)
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "workqueue_depth"} {
		if !names[name] {
			t.Errorf("%s is not served", name)
		}
	}
	if names["registered_metrics_total"] {
		t.Error("component-base's registered_metrics_total is served")
	}
}

func leaderValue(t *testing.T, g *prometheus.GaugeVec, lease string) float64 {
	t.Helper()
	return testutil.ToFloat64(g.WithLabelValues(lease))
}

func TestLeaderStatusDisabled(t *testing.T) {
	g, err := NewLeaderStatus(prometheus.NewRegistry(), "binder")
	if err != nil {
		t.Fatal(err)
	}
	var during float64
	err = RunElected(context.Background(), nil, LeaderOptions{Status: g}, &Health{}, func(context.Context) error {
		during = leaderValue(t, g, "")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if during != 1 || leaderValue(t, g, "") != 0 {
		t.Errorf("without leader election: %v while working, %v after; want 1, 0", during, leaderValue(t, g, ""))
	}
}

func TestLeaderStatusElected(t *testing.T) {
	g, err := NewLeaderStatus(prometheus.NewRegistry(), "provisioner")
	if err != nil {
		t.Fatal(err)
	}
	o := testLeaderOptions("me")
	o.Status = g
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := make(chan struct{})
	returned := make(chan error, 1)
	go func() {
		returned <- RunElected(ctx, fake.NewClientset(), o, &Health{}, func(ctx context.Context) error {
			close(running)
			<-ctx.Done()
			return nil
		})
	}()
	receive(t, "run to start", running)
	if v := leaderValue(t, g, "ns/lease"); v != 1 {
		t.Errorf("while leading: %v, want 1", v)
	}
	cancel()
	if err := receive(t, "RunElected to return", returned); err != nil {
		t.Fatal(err)
	}
	if v := leaderValue(t, g, "ns/lease"); v != 0 {
		t.Errorf("after leading: %v, want 0", v)
	}
}

func TestLeaderStatusStandingBy(t *testing.T) {
	g, err := NewLeaderStatus(prometheus.NewRegistry(), "binder")
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	client := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	})
	o := testLeaderOptions("me")
	o.Status = g
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() {
		returned <- RunElected(ctx, client, o, &Health{}, func(context.Context) error { return nil })
	}()
	waitFor(t, "a try on the lease", 10*time.Second, func() bool {
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "leases" {
				return true
			}
		}
		return false
	})
	if v := leaderValue(t, g, "ns/lease"); v != 0 {
		t.Errorf("standing by: %v, want 0", v)
	}
	cancel()
	receive(t, "RunElected to return", returned)
}
