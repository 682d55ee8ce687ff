// Package bench measures tether's binder against the
// persistentvolume-binder-controller of kube-controller-manager (KCM) on a
// local control plane: N volumes and N claims exist before the binder
// starts, and the bench times how long it takes to bind them all. Run it with
// `make bench-binder`; the test skips itself unless TETHER_BENCH is set.
//
// This file holds the pure parts: parsing, statistics and the report.
package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result is one binder's run at one size.
type Result struct {
	N      int
	Binder string // "tether" (or "tether@w<workers>"), "kcm", "floor" or "floor+watch"
	// Skipped, when not empty, says why there are no figures.
	Skipped string
	// First and Total are from the binder's start to the first and to the
	// last claim seen Bound.
	First, Total time.Duration
	// P50 and P99 are bind latencies: binder start to each claim seen Bound
	// (every claim exists before the binder starts).
	P50, P99 time.Duration
	// PeakRSS is the binder process's VmHWM, in bytes; APIServerRSS and
	// EtcdRSS are kube-apiserver's and etcd's.
	PeakRSS, APIServerRSS, EtcdRSS int64
	// Delay is the etcd delay each way (BENCH_ETCD_DELAY) of the run.
	Delay time.Duration
	// Requests counts the API requests per claim (RequestsPerClaim).
	Requests string
	// Started is when the binder started; APIRequests the requests per
	// claim (PerClaim); CPU the CPU use (CPUUse). For the JSON figures.
	Started     time.Time
	APIRequests map[string]float64
	CPU         string
}

// TetherWorkers says whether a BENCH_BINDERS name is tether's binder, and
// with how many workers: "tether" runs it with BENCH_WORKERS (or its
// default; workers ""), "tether@w48" with 48, so that one invocation can
// compare several.
func TetherWorkers(binder string) (workers string, ok bool) {
	if binder == "tether" {
		return "", true
	}
	w, found := strings.CutPrefix(binder, "tether@w")
	if n, err := strconv.Atoi(w); !found || err != nil || n < 1 {
		return "", false
	}
	return w, true
}

// FloorConns is how many pairs the floor binds at a time: enough that
// the API server, not the client, sets the pace, with 5 ms etcd round
// trips too.
const FloorConns = 128

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

// DefaultDelays are the etcd delay modes every bench runs unless
// BENCH_ETCD_DELAY says otherwise: loopback etcd, and 2.5 ms each way
// (5 ms per etcd round trip, a commit on a real cluster's disks).
const DefaultDelays = "0,2.5ms"

// ParseDelays parses BENCH_ETCD_DELAY: comma-separated durations, each
// zero or positive ("0,2.5ms").
func ParseDelays(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("bad delay %q in %q (want durations such as 0,2.5ms)", f, s)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no delay in %q", s)
	}
	return out, nil
}

// Table formats results: for each etcd delay, in the order first run, the
// median round of each binder at each size (by time to all bound), then
// the ratios of tether to KCM and to the floor, and each round's rate
// when there were several.
func Table(results []Result, qps, burst int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "binder bench: N volumes and N claims (1Gi, ReadWriteOnce, one no-provisioner Immediate class),\n")
	fmt.Fprintf(&b, "all created before the binder starts; binder API QPS %d, burst %d. \"floor\" is no binder: the same\n", qps, burst)
	fmt.Fprintf(&b, "four writes per pair from a plain client, %d pairs at a time (test/bench/floor.go); %q is the same\n", FloorConns, WatchingFloor)
	fmt.Fprintf(&b, "with a binder's watches (volume and claim informers, decoding every event) in its process.\n")
	fmt.Fprintf(&b, "Times run from the binder's start to each claim seen Bound by a watch; RSS is each process's VmHWM.\n")
	row := "%7s  %-13s %11s %11s %10s %9s %9s %11s %11s %10s\n"
	for _, delay := range delays(results) {
		fmt.Fprintf(&b, "\n%s\n", DelayLabel(delay))
		fmt.Fprintf(&b, row, "N", "binder", "first bound", "all bound", "claims/s", "p50", "p99", "binder RSS", "API srv RSS", "etcd RSS")
		mid, rounds := medianResults(results, delay)
		for _, r := range mid {
			if r.Skipped != "" {
				fmt.Fprintf(&b, "%7d  %-13s skipped: %s\n", r.N, r.Binder, r.Skipped)
				continue
			}
			fmt.Fprintf(&b, row, strconv.Itoa(r.N), r.Binder, seconds(r.First), seconds(r.Total),
				fmt.Sprintf("%.1f", r.ClaimsPerSecond()), seconds(r.P50), seconds(r.P99), mib(r.PeakRSS),
				mib(r.APIServerRSS), mib(r.EtcdRSS))
		}
		for _, r := range mid {
			if _, ok := TetherWorkers(r.Binder); !ok || r.Skipped != "" {
				continue
			}
			for _, other := range []string{"kcm", "floor", WatchingFloor} {
				i := slices.IndexFunc(mid, func(o Result) bool { return o.N == r.N && o.Binder == other && o.Skipped == "" })
				if i < 0 {
					continue
				}
				o := mid[i]
				fmt.Fprintf(&b, row, strconv.Itoa(r.N), r.Binder+"/"+other, ratio(r.First, o.First), ratio(r.Total, o.Total),
					ratioF(r.ClaimsPerSecond(), o.ClaimsPerSecond()), ratio(r.P50, o.P50), ratio(r.P99, o.P99),
					ratioF(float64(r.PeakRSS), float64(o.PeakRSS)), "", "")
			}
		}
		for _, line := range rounds {
			b.WriteString(line + "\n")
		}
		for _, r := range mid {
			if r.Requests != "" {
				fmt.Fprintf(&b, "%d %s: %s\n", r.N, r.Binder, r.Requests)
			}
		}
	}
	return b.String()
}

// DelayLabel names an etcd delay mode in reports.
func DelayLabel(delay time.Duration) string {
	if delay == 0 {
		return "etcd on loopback, no added delay:"
	}
	return fmt.Sprintf("etcd %s further each way (%s per etcd round trip, BENCH_ETCD_DELAY=%s):", delay, 2*delay, delay)
}

// delays lists the delays of results in the order first seen.
func delays(results []Result) []time.Duration {
	var out []time.Duration
	for _, r := range results {
		if !slices.Contains(out, r.Delay) {
			out = append(out, r.Delay)
		}
	}
	return out
}

// medianResults picks, for each size and binder at delay, the round with
// the median time to all bound (the lower middle of an even count; a
// skipped or failed run only when no round has figures), and lists every
// round's rate where there were several.
func medianResults(results []Result, delay time.Duration) (mid []Result, rounds []string) {
	type key struct {
		n      int
		binder string
	}
	var keys []key
	byKey := map[key][]Result{}
	for _, r := range results {
		if r.Delay != delay {
			continue
		}
		k := key{r.N, r.Binder}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	for _, k := range keys {
		all := byKey[k]
		ok := slices.DeleteFunc(slices.Clone(all), func(r Result) bool { return r.Skipped != "" })
		if len(ok) == 0 {
			mid = append(mid, all[0])
			continue
		}
		slices.SortFunc(ok, func(a, b Result) int { return int(a.Total - b.Total) })
		mid = append(mid, ok[(len(ok)-1)/2])
		if len(all) > 1 {
			var rates []string
			for _, r := range all {
				if r.Skipped != "" {
					rates = append(rates, "failed")
				} else {
					rates = append(rates, fmt.Sprintf("%.1f", r.ClaimsPerSecond()))
				}
			}
			rounds = append(rounds, fmt.Sprintf("%d %s, claims/s of each of %d rounds: %s", k.n, k.binder, len(all), strings.Join(rates, ", ")))
		}
	}
	return mid, rounds
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
