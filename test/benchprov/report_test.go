package benchprov

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-csi/tether/test/bench"

	"github.com/tether-csi/tether/test/benchkit"
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
	apiRSS, etcdRSS    int64  // kube-apiserver's and etcd's VmHWM
	upstream, floor    bool
	qps                int
	round              int           // which of BENCH_RUNS rounds
	delay              time.Duration // etcd delay each way (BENCH_ETCD_DELAY)
	started            time.Time
	apiRequests        map[string]float64 // per claim, for the JSON figures
}

// runAll runs, for each etcd delay of BENCH_ETCD_DELAY (default
// bench.DefaultDelays), every selected pair BENCH_RUNS times (default
// defaultRuns), the pairs interleaved within each round so that a slow
// spell of the machine does not land on one pair only.
func runAll(t *testing.T, benchName string, pairs []pair, defaultRuns int, run func(*testing.T, pair, string, time.Duration) row) []row {
	runs := benchkit.Int(t, "BENCH_RUNS", defaultRuns, false)
	delays := os.Getenv("BENCH_ETCD_DELAY")
	if delays == "" {
		delays = bench.DefaultDelays
	}
	ds, err := bench.ParseDelays(delays)
	if err != nil {
		t.Fatalf("BENCH_ETCD_DELAY: %v", err)
	}
	var rows []row
	for _, delay := range ds {
		for round := 1; round <= runs; round++ {
			for _, p := range pairs {
				label := fmt.Sprintf("%s@%s", p.name, qpsLabel(p.qps))
				if p.workers > 0 {
					label += fmt.Sprintf("@w%d", p.workers)
				}
				if p.floor {
					label = p.name
				}
				if !selected(p, label) {
					continue
				}
				name := fmt.Sprintf("%s/delay%s", label, delay)
				if runs > 1 {
					name = fmt.Sprintf("%s#%d", name, round)
				}
				t.Run(name, func(t *testing.T) {
					started := time.Now()
					r := run(t, p, label, delay)
					r.round, r.delay, r.started = round, delay, started
					rows = append(rows, r)
					writeRow(t, benchName, r)
				})
			}
		}
	}
	return rows
}

// selected applies BENCH_ONLY: comma-separated pair names ("tether",
// "upstream", "floor") or labels ("tether@qps2000").
func selected(p pair, label string) bool {
	only := os.Getenv("BENCH_ONLY")
	if only == "" {
		return true
	}
	for _, o := range strings.Split(only, ",") {
		if o == p.name || o == label {
			return true
		}
	}
	return false
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

// render prints, for each etcd delay, every run, then (with several
// rounds) the median run of each pair, and the ratio of tether to upstream
// at each QPS setting and to the floor, from the medians.
func render(title string, rows []row) string {
	var b strings.Builder
	b.WriteString(title + ".\nTimes from the first claim's creation; latency from each claim's creation to Bound, seen by a watch; RSS is VmHWM.\n")
	b.WriteString("\"floor\" is no binder and no provisioner: the claim and the pipeline's writes from a plain client, 256 claims at a time (bench.ProvisionWrites).\n")
	var delays []time.Duration
	for _, r := range rows {
		if !slices.Contains(delays, r.delay) {
			delays = append(delays, r.delay)
		}
	}
	for _, d := range delays {
		b.WriteString("\n" + bench.DelayLabel(d) + "\n")
		renderDelay(&b, slices.DeleteFunc(slices.Clone(rows), func(r row) bool { return r.delay != d }))
	}
	return b.String()
}

func renderDelay(b *strings.Builder, rows []row) {
	f := "%-24s %10s %9s %8s %8s %12s %12s %12s %10s\n"
	table := func(rows []row, name func(row) string) {
		fmt.Fprintf(b, f, "pair", "all bound", "claims/s", "p50", "p99", "binder RSS", "prov. RSS", "API srv RSS", "etcd RSS")
		for _, r := range rows {
			if r.failed != "" {
				fmt.Fprintf(b, "%-24s failed: %s\n", name(r), r.failed)
				continue
			}
			fmt.Fprintf(b, f, name(r), sec(r.total), fmt.Sprintf("%.1f", rate(r)), sec(r.p50), sec(r.p99), mib(r.binderRSS), mib(r.provRSS),
				mib(r.apiRSS), mib(r.etcdRSS))
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
	var floor *row
	for _, r := range mid {
		byKey[fmt.Sprintf("%v-%d", r.upstream, r.qps)] = r
		if r.floor {
			floor = &r
		}
	}
	for _, r := range mid {
		if r.upstream || r.floor {
			continue
		}
		if u, ok := byKey[fmt.Sprintf("true-%d", r.qps)]; ok {
			fmt.Fprintf(b, "tether/upstream at %s: %.2fx the claims/s, %.2fx the p99\n", strings.TrimPrefix(r.label, "tether@"), rate(r)/rate(u), float64(r.p99)/float64(u.p99))
		}
		if floor != nil {
			fmt.Fprintf(b, "tether at %s / floor: %.2fx the claims/s (%.0f%% of the floor)\n", strings.TrimPrefix(r.label, "tether@"), rate(r)/rate(*floor), 100*rate(r)/rate(*floor))
		}
	}
	for _, r := range mid {
		if r.requests != "" {
			fmt.Fprintf(b, "%s: %s\n", r.label, r.requests)
		}
		if r.cpu != "" {
			fmt.Fprintf(b, "%s: %s\n", r.label, r.cpu)
		}
	}
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
	floor := run("floor", false, 1, 1)
	floor.floor, floor.qps = true, 0
	delayed := run("tether@qps2000", false, 4, 1)
	delayed.delay = 2500 * time.Microsecond
	out := render("test", append(rows, floor, delayed))
	for _, want := range []string{"tether@qps2000 #3", "upstream@qps2000 #3", "failed: timeout", "Median run of each pair:",
		"tether/upstream at qps2000: 2.00x the claims/s", "tether at qps2000 / floor: 0.50x the claims/s (50% of the floor)",
		"etcd on loopback, no added delay:", "etcd 2.5ms further each way"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// renderScaling compares each pair's runs at the smallest and the largest
// size (BENCH_N=10000,100000): the time ratio against the size ratio (a
// linear pipeline gives the same), and memory per claim, whole (peak RSS
// over claims) and marginal (what the extra claims added).
func renderScaling(small, large int, smallRows, largeRows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nscaling from %d to %d claims (%.0fx as many):\n", small, large, float64(large)/float64(small))
	f := "%-24s %-10s %12s %18s %18s %18s\n"
	fmt.Fprintf(&b, f, "pair", "etcd delay", "time ratio", "binder KiB/claim", "prov. KiB/claim", "marginal b+p KiB")
	perClaim := func(rss int64, n int) string { return fmt.Sprintf("%.2f", float64(rss)/1024/float64(n)) }
	smalls := medians(smallRows)
	for _, l := range medians(largeRows) {
		i := slices.IndexFunc(smalls, func(s row) bool { return s.label == l.label && s.delay == l.delay })
		if i < 0 || l.failed != "" {
			continue
		}
		s := smalls[i]
		if s.failed != "" || s.total <= 0 {
			continue
		}
		marginal := "-"
		if l.binderRSS > 0 && l.provRSS > 0 {
			marginal = fmt.Sprintf("%.2f", float64(l.binderRSS+l.provRSS-s.binderRSS-s.provRSS)/1024/float64(large-small))
		}
		fmt.Fprintf(&b, f, l.label, l.delay.String(), fmt.Sprintf("%.2f", l.total.Seconds()/s.total.Seconds()),
			perClaim(l.binderRSS, large), perClaim(l.provRSS, large), marginal)
	}
	return b.String()
}

func TestRenderScaling(t *testing.T) {
	small := []row{{label: "tether@qps2000", n: 10, total: 2 * time.Second, binderRSS: 10 << 20, provRSS: 10 << 20}}
	large := []row{{label: "tether@qps2000", n: 100, total: 21 * time.Second, binderRSS: 20 << 20, provRSS: 30 << 20}}
	got := renderScaling(10, 100, small, large)
	for _, want := range []string{"10.50", "204.80", "307.20", "341.33"} {
		if !strings.Contains(got, want) {
			t.Errorf("renderScaling lacks %s:\n%s", want, got)
		}
	}
}
