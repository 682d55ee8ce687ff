package benchprov

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// row is one measured run.
type row struct {
	label              string
	n                  int
	total, p50, p99    time.Duration
	binderRSS, provRSS int64
	failed             string
	requests           string // API requests per claim, by verb and resource
	cpu                string // CPU use during the run
	upstream           bool
	qps                int
	round              int // which of BENCH_RUNS rounds
}

// runAll runs every selected pair BENCH_RUNS times (default defaultRuns),
// the pairs interleaved within each round so that a slow spell of the
// machine does not land on one pair only.
func runAll(t *testing.T, pairs []pair, defaultRuns int, run func(*testing.T, pair, string) row) []row {
	runs := envInt(t, "BENCH_RUNS", defaultRuns)
	var rows []row
	for round := 1; round <= runs; round++ {
		for _, p := range pairs {
			label := fmt.Sprintf("%s@%s", p.name, qpsLabel(p.qps))
			if !selected(p, label) {
				continue
			}
			name := label
			if runs > 1 {
				name = fmt.Sprintf("%s#%d", label, round)
			}
			t.Run(name, func(t *testing.T) {
				r := run(t, p, label)
				r.round = round
				rows = append(rows, r)
			})
		}
	}
	return rows
}

// selected applies BENCH_ONLY: a pair's name ("tether", "upstream") or
// label ("tether@qps2000").
func selected(p pair, label string) bool {
	only := os.Getenv("BENCH_ONLY")
	return only == "" || only == p.name || only == label
}

// medians picks, for each label, the run with the median time to all
// Bound (the lower middle one for an even count), in the order the labels
// first ran.
func medians(rows []row) []row {
	var labels []string
	byLabel := map[string][]row{}
	for _, r := range rows {
		if r.failed != "" {
			continue
		}
		if _, ok := byLabel[r.label]; !ok {
			labels = append(labels, r.label)
		}
		byLabel[r.label] = append(byLabel[r.label], r)
	}
	var out []row
	for _, l := range labels {
		rs := slices.Clone(byLabel[l])
		slices.SortFunc(rs, func(a, b row) int { return int(a.total - b.total) })
		out = append(out, rs[(len(rs)-1)/2])
	}
	return out
}

// render prints every run, then (with several rounds) the median run of
// each pair, and the ratio of tether to upstream at each QPS setting,
// from the medians.
func render(title string, rows []row) string {
	var b strings.Builder
	b.WriteString(title + ".\nTimes from the first claim's creation; latency from each claim's creation to Bound, seen by a watch; RSS is VmHWM.\n")
	f := "%-24s %10s %9s %8s %8s %12s %12s\n"
	table := func(rows []row, name func(row) string) {
		fmt.Fprintf(&b, f, "pair", "all bound", "claims/s", "p50", "p99", "binder RSS", "prov. RSS")
		for _, r := range rows {
			if r.failed != "" {
				fmt.Fprintf(&b, "%-24s failed: %s\n", name(r), r.failed)
				continue
			}
			fmt.Fprintf(&b, f, name(r), sec(r.total), fmt.Sprintf("%.1f", rate(r)), sec(r.p50), sec(r.p99), mib(r.binderRSS), mib(r.provRSS))
		}
	}
	mid := medians(rows)
	several := len(mid) < len(rows)
	table(rows, func(r row) string {
		if several {
			return fmt.Sprintf("%s #%d", r.label, r.round)
		}
		return r.label
	})
	if several {
		b.WriteString("Median run of each pair:\n")
		table(mid, func(r row) string { return r.label })
	}
	byKey := map[string]row{}
	for _, r := range mid {
		byKey[fmt.Sprintf("%v-%d", r.upstream, r.qps)] = r
	}
	for _, r := range mid {
		u, ok := byKey[fmt.Sprintf("true-%d", r.qps)]
		if r.upstream || !ok {
			continue
		}
		fmt.Fprintf(&b, "tether/upstream at %s: %.2fx the claims/s, %.2fx the p99\n", qpsLabel(r.qps), rate(r)/rate(u), float64(r.p99)/float64(u.p99))
	}
	for _, r := range mid {
		if r.requests != "" {
			fmt.Fprintf(&b, "%s: %s\n", r.label, r.requests)
		}
		if r.cpu != "" {
			fmt.Fprintf(&b, "%s: %s\n", r.label, r.cpu)
		}
	}
	return b.String()
}

func rate(r row) float64 {
	if r.total <= 0 {
		return 0
	}
	return float64(r.n) / r.total.Seconds()
}

func sec(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
func mib(b int64) string         { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func TestMediansAndRatio(t *testing.T) {
	run := func(label string, upstream bool, seconds float64, round int) row {
		d := time.Duration(seconds * float64(time.Second))
		return row{label: label, n: 100, total: d, p50: d / 2, p99: d, upstream: upstream, qps: 2000, round: round}
	}
	rows := []row{
		run("tether@qps2000", false, 3, 1), run("upstream@qps2000", true, 6, 1),
		run("tether@qps2000", false, 1, 2), run("upstream@qps2000", true, 4, 2),
		run("tether@qps2000", false, 2, 3), {label: "upstream@qps2000", upstream: true, qps: 2000, failed: "timeout", round: 3},
	}
	mid := medians(rows)
	if len(mid) != 2 || mid[0].total != 2*time.Second || mid[1].total != 4*time.Second {
		t.Fatalf("medians: %+v", mid)
	}
	out := render("test", rows)
	for _, want := range []string{"tether@qps2000 #3", "upstream@qps2000 #3", "failed: timeout", "Median run of each pair:", "tether/upstream at qps2000: 2.00x the claims/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
