// Package bench measures tether's binder against the
// persistentvolume-binder-controller of kube-controller-manager (KCM) on a
// local control plane: N volumes and N claims exist before the binder
// starts, and the bench times how long it takes to bind them all. Run it with
// `make bench-binder`; the test skips itself unless TETHER_BENCH is set.
//
// This file holds the pure parts: parsing, statistics and the report.
package bench

import (
	"bufio"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result is one binder's run at one size.
type Result struct {
	N      int
	Binder string // "tether" or "kcm"
	// Skipped, when not empty, says why there are no figures.
	Skipped string
	// First and Total are from the binder's start to the first and to the
	// last claim seen Bound.
	First, Total time.Duration
	// P50 and P99 are bind latencies: binder start to each claim seen Bound
	// (every claim exists before the binder starts).
	P50, P99 time.Duration
	// PeakRSS is the binder process's VmHWM, in bytes.
	PeakRSS int64
}

// ClaimsPerSecond is the bind rate over the whole run.
func (r Result) ClaimsPerSecond() float64 {
	if r.Total <= 0 {
		return 0
	}
	return float64(r.N) / r.Total.Seconds()
}

// ParseSizes parses a comma-separated list of positive integers ("1000,10000").
func ParseSizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q in %q", f, s)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) == 0 {
		return nil, fmt.Errorf("no size in %q", s)
	}
	return sizes, nil
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// durations; it sorts a copy.
func Percentile(durations []time.Duration, p float64) time.Duration {
	if len(durations) == 0 {
		return 0
	}
	sorted := slices.Clone(durations)
	slices.Sort(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// ParseVmHWM reads the peak resident set size, in bytes, from the text of
// /proc/<pid>/status.
func ParseVmHWM(status string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmHWM line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected VmHWM line %q: %w", sc.Text(), err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmHWM line")
}

// Table formats results, with the ratio of tether to KCM for each size
// where both ran.
func Table(results []Result, qps, burst int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "binder bench: N volumes and N claims (1Gi, ReadWriteOnce, one no-provisioner Immediate class),\n")
	fmt.Fprintf(&b, "all created before the binder starts; binder API QPS %d, burst %d.\n", qps, burst)
	fmt.Fprintf(&b, "Times run from the binder's start to each claim seen Bound by a watch; RSS is the process's VmHWM.\n")
	row := "%7s  %-12s %11s %11s %10s %9s %9s %10s\n"
	fmt.Fprintf(&b, row, "N", "binder", "first bound", "all bound", "claims/s", "p50", "p99", "peak RSS")
	for _, r := range results {
		if r.Skipped != "" {
			fmt.Fprintf(&b, "%7d  %-12s skipped: %s\n", r.N, r.Binder, r.Skipped)
			continue
		}
		fmt.Fprintf(&b, row, strconv.Itoa(r.N), r.Binder, seconds(r.First), seconds(r.Total),
			fmt.Sprintf("%.1f", r.ClaimsPerSecond()), seconds(r.P50), seconds(r.P99), mib(r.PeakRSS))
		if r.Binder != "kcm" {
			continue
		}
		// The ratio row follows KCM's row of the same size.
		i := slices.IndexFunc(results, func(o Result) bool { return o.N == r.N && o.Binder == "tether" && o.Skipped == "" })
		if i < 0 {
			continue
		}
		t := results[i]
		fmt.Fprintf(&b, row, strconv.Itoa(r.N), "tether/kcm", ratio(t.First, r.First), ratio(t.Total, r.Total),
			ratioF(t.ClaimsPerSecond(), r.ClaimsPerSecond()), ratio(t.P50, r.P50), ratio(t.P99, r.P99),
			ratioF(float64(t.PeakRSS), float64(r.PeakRSS)))
	}
	return b.String()
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func mib(bytes int64) string { return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)) }

func ratio(a, b time.Duration) string { return ratioF(float64(a), float64(b)) }

func ratioF(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}
