package server

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/legacyregistry"

	// client-go's metrics, as kube-controller-manager exposes them: every
	// named workqueue (workqueue_*{name}), the API client's requests and
	// rate-limiter waits (rest_client_*) and client-go's leader election
	// (leader_election_*{name}). Their init functions set client-go's
	// providers, before any queue or client is made.
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection"
	_ "k8s.io/component-base/metrics/prometheus/restclient"
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
)

// clientGoPrefixes are the metric families taken from component-base's
// global registry: client-go's, and not its Go and process collectors
// (NewRegistry has its own) nor its registry's own counts.
var clientGoPrefixes = []string{"workqueue_", "rest_client_", "leader_election_"}

// clientGoFamily reports whether a family of component-base's global
// registry is served.
func clientGoFamily(name string) bool {
	for _, p := range clientGoPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// clientGoGatherer gathers client-go's metric families from
// component-base's global registry.
type clientGoGatherer struct{ from prometheus.Gatherer }

func (g clientGoGatherer) Gather() ([]*dto.MetricFamily, error) {
	all, err := g.from.Gather()
	var out []*dto.MetricFamily
	for _, f := range all {
		if clientGoFamily(f.GetName()) {
			out = append(out, f)
		}
	}
	return out, err
}

// Gatherer is what the metrics endpoint serves: reg's metrics and
// client-go's.
func Gatherer(reg *prometheus.Registry) prometheus.Gatherer {
	return prometheus.Gatherers{reg, clientGoGatherer{legacyregistry.DefaultGatherer}}
}

// LeaderStatusMetric is the leader status gauge's name.
const LeaderStatusMetric = "tether_leader_status"

// NewLeaderStatus registers the leader status gauge of a component
// ("binder", "provisioner") on reg: by Lease (namespace/name, "" without
// leader election), 1 while this process leads (or works without leader
// election), 0 while it stands by or once it has stopped. Set it as
// LeaderOptions.Status.
func NewLeaderStatus(reg prometheus.Registerer, component string) (*prometheus.GaugeVec, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name:        LeaderStatusMetric,
		Help:        "1 while this process leads its Lease (or works, without leader election), 0 while it stands by or after it stopped; by Lease (namespace/name, empty without leader election).",
		ConstLabels: prometheus.Labels{"component": component},
	}, []string{"lease"})
	if err := reg.Register(g); err != nil {
		return nil, err
	}
	return g, nil
}

// leaderStatus sets o.Status's gauge of a lease, if there is one.
func (o LeaderOptions) leaderStatus(lease string, leading bool) {
	if o.Status == nil {
		return
	}
	v := 0.0
	if leading {
		v = 1
	}
	o.Status.WithLabelValues(lease).Set(v)
}
