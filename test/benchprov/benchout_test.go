package benchprov

import (
	"testing"

	"github.com/tether-csi/tether/test/benchout"
)

// writeRow appends one run of the provisioner or WaitForFirstConsumer
// bench to _artifacts/bench/<benchName>.json (test/benchout).
func writeRow(t *testing.T, benchName string, r row) {
	settings := map[string]any{"n": r.n, "qps": r.qps, "round": r.round, "etcd_delay_seconds": r.delay.Seconds(),
		"upstream": r.upstream, "floor": r.floor}
	figures := map[string]any{"api_requests_per_claim": r.apiRequests, "requests": r.requests, "cpu": r.cpu,
		"apiserver_rss_bytes": r.apiRSS, "etcd_rss_bytes": r.etcdRSS}
	if r.failed != "" {
		figures["failed"] = r.failed
	} else {
		figures["bound_seconds"], figures["claims_per_second"] = r.total.Seconds(), rate(r)
		figures["bound_p50_seconds"], figures["bound_p99_seconds"] = r.p50.Seconds(), r.p99.Seconds()
		figures["binder_rss_bytes"], figures["provisioner_rss_bytes"] = r.binderRSS, r.provRSS
	}
	if path, err := benchout.Write(benchout.Run{Bench: benchName, Label: r.label, Started: r.started, Settings: settings, Figures: figures}); err != nil {
		t.Errorf("writing the figures: %v", err)
	} else {
		t.Logf("figures appended to %s", path)
	}
}
