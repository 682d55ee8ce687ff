package bench

import (
	"testing"

	"github.com/tether-csi/tether/test/benchout"
)

// writeResult appends one run of the binder bench to
// _artifacts/bench/binder.json (test/benchout).
func writeResult(t *testing.T, cfg benchConfig, r Result, round int) {
	settings := map[string]any{"binder": r.Binder, "n": r.N, "qps": cfg.qps, "burst": cfg.burst, "workers": cfg.workers,
		"etcd_delay_seconds": r.Delay.Seconds(), "round": round}
	if w, ok := TetherWorkers(r.Binder); ok && w != "" {
		settings["workers"] = w
	}
	figures := map[string]any{}
	if r.Skipped != "" {
		figures["failed"] = r.Skipped
	} else {
		figures = map[string]any{
			"first_bound_seconds": r.First.Seconds(), "bound_seconds": r.Total.Seconds(), "claims_per_second": r.ClaimsPerSecond(),
			"bound_p50_seconds": r.P50.Seconds(), "bound_p99_seconds": r.P99.Seconds(),
			"binder_rss_bytes": r.PeakRSS, "apiserver_rss_bytes": r.APIServerRSS, "etcd_rss_bytes": r.EtcdRSS,
			"api_requests_per_claim": r.APIRequests, "cpu": r.CPU,
		}
	}
	if path, err := benchout.Write(benchout.Run{Bench: "binder", Label: r.Binder, Started: r.Started, Settings: settings, Figures: figures}); err != nil {
		t.Errorf("writing the figures: %v", err)
	} else {
		t.Logf("figures appended to %s", path)
	}
}
