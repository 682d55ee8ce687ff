package benchnodes

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tether-csi/tether/test/benchkit"
)

// The pure parts of bench-roll: its windows, statistics and report. They
// run in `make test` without TETHER_BENCH.

// window is a stretch of the run, [from, to).
type window struct{ from, to time.Time }

func (w window) holds(at time.Time) bool {
	return !at.IsZero() && !at.Before(w.from) && at.Before(w.to)
}

// roll is one roll's figures.
type roll struct {
	window     window
	synced     []time.Duration // each process's start to its caches synced
	caughtUp   []time.Duration // each process's start to its listings behind the watch caught up
	serving    []time.Duration // each process's start to the PV of a probe made once it synced
	waited     []time.Duration // each process's start to the PV of a probe made while it was down
	allServing time.Duration   // the roll's start to the last PV of a probe made once its node synced
	notServing int             // probes without a PV
	peak       []benchkit.Mem  // each process once it served (VmHWM: its peak)
	rest       []benchkit.Mem  // each process after the window that follows
	apiCPU     float64         // kube-apiserver's CPU over the roll, in cores
	etcdCPU    float64
	apiPeak    int64 // kube-apiserver's VmRSS, the most sampled over the roll
	etcdPeak   int64
	// Claim and PV list requests (pages) the API server served over the
	// roll from its watch cache, and from etcd.
	listsCache, listsEtcd float64
}

// rollRow is one stack's run.
type rollRow struct {
	label     string
	nodes     int
	steady    window // before the first roll
	all, one  roll
	afterAll  window
	afterOne  window
	claims    map[string]streamClaim
	errs      []string
	wallclock time.Duration
}

// streamStats are the stream's figures over a window: claims made in it to
// their PV, claims deleted in it to their PV gone, and the claims made in
// it whose PV never came (probes left out: the roll's own).
type streamStats struct {
	toPV, toGone []time.Duration
	made, noPV   int
}

func statsIn(claims map[string]streamClaim, w window) streamStats {
	var s streamStats
	for _, c := range claims {
		if c.probe {
			continue
		}
		if w.holds(c.created) {
			s.made++
			if c.pvSeen.IsZero() {
				s.noPV++
			} else {
				s.toPV = append(s.toPV, c.pvSeen.Sub(c.created))
			}
		}
		if w.holds(c.deleted) && !c.pvGone.IsZero() {
			s.toGone = append(s.toGone, c.pvGone.Sub(c.deleted))
		}
	}
	return s
}

func p50p99(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	return secs(benchkit.Percentile(d, 50)) + " / " + secs(benchkit.Percentile(d, 99))
}

func medMax(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	return secs(benchkit.Percentile(d, 50)) + " / " + secs(benchkit.Percentile(d, 100))
}

// renderRoll prints the rows side by side, a column per stack.
func renderRoll(title string, rows []rollRow) string {
	table := benchkit.NewColumns(rows, func(r rollRow) string { return r.label })
	add := table.Add
	add("node provisioners", func(r rollRow) string { return fmt.Sprint(r.nodes) })
	stream := func(name string, w func(r rollRow) window) {
		add(name+": new claim to PV, p50 / p99", func(r rollRow) string {
			s := statsIn(r.claims, w(r))
			out := p50p99(s.toPV)
			if s.noPV > 0 {
				out += fmt.Sprintf(" (%d of %d no PV)", s.noPV, s.made)
			}
			return out
		})
		add(name+": claim deleted to PV gone, p50 / p99", func(r rollRow) string { return p50p99(statsIn(r.claims, w(r)).toGone) })
	}
	stream("steady, before the rolls", func(r rollRow) window { return r.steady })
	for _, k := range []struct {
		name  string
		roll  func(r rollRow) roll
		after func(r rollRow) window
	}{
		{"all at once", func(r rollRow) roll { return r.all }, func(r rollRow) window { return r.afterAll }},
		{"one at a time", func(r rollRow) roll { return r.one }, func(r rollRow) window { return r.afterOne }},
	} {
		add("**roll "+k.name+"**: its length; every node serving again", func(r rollRow) string {
			rl := k.roll(r)
			out := secs(rl.window.to.Sub(rl.window.from)) + "; " + secs(rl.allServing)
			if rl.notServing > 0 {
				out += fmt.Sprintf(" (%d never)", rl.notServing)
			}
			return out
		})
		add(k.name+": process start to caches synced, median / max", func(r rollRow) string { return medMax(k.roll(r).synced) })
		add(k.name+": process start to the PV of a claim made once it synced, median / max", func(r rollRow) string { return medMax(k.roll(r).serving) })
		add(k.name+": process start to the PV of a claim made while it was down, median / max", func(r rollRow) string { return medMax(k.roll(r).waited) })
		add(k.name+": process start to its listings caught up (behind the watch), median / max", func(r rollRow) string { return medMax(k.roll(r).caughtUp) })
		stream(k.name+", during", func(r rollRow) window { return k.roll(r).window })
		stream(k.name+", after", k.after)
		add(k.name+": peak RSS (VmHWM), median / max", func(r rollRow) string {
			return memOf(k.roll(r).peak, func(m benchkit.Mem) int64 { return m.HWM })
		})
		add(k.name+": at rest, VmRSS / RssAnon / RssFile, median", func(r rollRow) string {
			rest := k.roll(r).rest
			med := func(f func(m benchkit.Mem) int64) string {
				v := make([]int64, len(rest))
				for i, m := range rest {
					v[i] = f(m)
				}
				m, _ := benchkit.MedianMax(v)
				return benchkit.MiB(m)
			}
			return med(func(m benchkit.Mem) int64 { return m.RSS }) + " / " + med(func(m benchkit.Mem) int64 { return m.Anon }) +
				" / " + med(func(m benchkit.Mem) int64 { return m.File })
		})
		add(k.name+": kube-apiserver / etcd CPU over the roll, cores", func(r rollRow) string {
			return fmt.Sprintf("%.2f / %.2f", k.roll(r).apiCPU, k.roll(r).etcdCPU)
		})
		add(k.name+": claim and PV list pages served from the watch cache / from etcd", func(r rollRow) string {
			return fmt.Sprintf("%.0f / %.0f", k.roll(r).listsCache, k.roll(r).listsEtcd)
		})
		add(k.name+": kube-apiserver / etcd VmRSS, most over the roll", func(r rollRow) string {
			return benchkit.MiB(k.roll(r).apiPeak) + " / " + benchkit.MiB(k.roll(r).etcdPeak)
		})
	}
	add("stream errors", func(r rollRow) string { return fmt.Sprint(len(r.errs)) })
	add("the stack's run", func(r rollRow) string { return secs(r.wallclock) })

	return "\n### " + title + "\n\n" + table.Markdown()
}

// figures are a row's figures for benchout, sizes in bytes and times in
// seconds.
func (r rollRow) figures() map[string]any {
	f := map[string]any{"provisioners": r.nodes, "stream_errors": len(r.errs), "run_seconds": r.wallclock.Seconds()}
	put := func(key string, w window) {
		s := statsIn(r.claims, w)
		if len(s.toPV) > 0 {
			f[key+"_to_pv_p50_seconds"], f[key+"_to_pv_p99_seconds"] = benchkit.Percentile(s.toPV, 50).Seconds(), benchkit.Percentile(s.toPV, 99).Seconds()
		}
		if len(s.toGone) > 0 {
			f[key+"_to_gone_p50_seconds"], f[key+"_to_gone_p99_seconds"] = benchkit.Percentile(s.toGone, 50).Seconds(), benchkit.Percentile(s.toGone, 99).Seconds()
		}
		f[key+"_no_pv"] = s.noPV
	}
	put("steady", r.steady)
	for key, rl := range map[string]roll{"all": r.all, "one": r.one} {
		f[key+"_seconds"] = rl.window.to.Sub(rl.window.from).Seconds()
		f[key+"_all_serving_seconds"] = rl.allServing.Seconds()
		f[key+"_not_serving"] = rl.notServing
		if len(rl.caughtUp) > 0 {
			f[key+"_caught_up_p50_seconds"], f[key+"_caught_up_max_seconds"] = benchkit.Percentile(rl.caughtUp, 50).Seconds(), benchkit.Percentile(rl.caughtUp, 100).Seconds()
		}
		if len(rl.serving) > 0 {
			f[key+"_serving_p50_seconds"], f[key+"_serving_max_seconds"] = benchkit.Percentile(rl.serving, 50).Seconds(), benchkit.Percentile(rl.serving, 100).Seconds()
		}
		if len(rl.waited) > 0 {
			f[key+"_waited_p50_seconds"], f[key+"_waited_max_seconds"] = benchkit.Percentile(rl.waited, 50).Seconds(), benchkit.Percentile(rl.waited, 100).Seconds()
		}
		var hwm, anon, file []int64
		for _, m := range rl.peak {
			hwm = append(hwm, m.HWM)
		}
		for _, m := range rl.rest {
			anon, file = append(anon, m.Anon), append(file, m.File)
		}
		f[key+"_hwm_p50_bytes"], f[key+"_hwm_max_bytes"] = benchkit.MedianMax(hwm)
		f[key+"_rest_anon_p50_bytes"], _ = benchkit.MedianMax(anon)
		f[key+"_rest_file_p50_bytes"], _ = benchkit.MedianMax(file)
		f[key+"_apiserver_cores"], f[key+"_etcd_cores"] = rl.apiCPU, rl.etcdCPU
		f[key+"_apiserver_rss_max_bytes"], f[key+"_etcd_rss_max_bytes"] = rl.apiPeak, rl.etcdPeak
		f[key+"_lists_cache"], f[key+"_lists_etcd"] = rl.listsCache, rl.listsEtcd
		put(key+"_during", rl.window)
	}
	put("after_all", r.afterAll)
	put("after_one", r.afterOne)
	return f
}

func TestStatsIn(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	claims := map[string]streamClaim{
		"a": {created: at(1), pvSeen: at(1.5), deleted: at(7), pvGone: at(8)},
		"b": {created: at(2), pvSeen: at(4)},                     // deleted after the window
		"c": {created: at(3)},                                    // no PV yet
		"d": {created: at(11), pvSeen: at(12)},                   // after the window
		"p": {created: at(2), pvSeen: at(9), probe: true},        // a probe: the roll's
		"e": {created: at(0.5), pvSeen: at(0.6), deleted: at(2)}, // deleted, its PV not seen gone
		"f": {created: at(-5), pvSeen: at(-4), deleted: at(3), pvGone: at(3.5)},
	}
	s := statsIn(claims, window{from: at(1), to: at(10)})
	if s.made != 3 || s.noPV != 1 {
		t.Errorf("made %d, no PV %d; want 3 and 1", s.made, s.noPV)
	}
	if got := benchkit.Percentile(s.toPV, 100); len(s.toPV) != 2 || got != 2*time.Second {
		t.Errorf("to PV %v", s.toPV)
	}
	if len(s.toGone) != 2 || benchkit.Percentile(s.toGone, 100) != time.Second || benchkit.Percentile(s.toGone, 1) != 500*time.Millisecond {
		t.Errorf("to gone %v", s.toGone)
	}
}

func TestRenderRoll(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	r := rollRow{label: "tether", nodes: 2, steady: window{t0, t0.Add(10 * time.Second)},
		claims: map[string]streamClaim{"a": {created: t0.Add(time.Second), pvSeen: t0.Add(1500 * time.Millisecond)}},
		all: roll{window: window{t0.Add(20 * time.Second), t0.Add(32 * time.Second)}, allServing: 12 * time.Second,
			serving: []time.Duration{3 * time.Second, 5 * time.Second}, waited: []time.Duration{7 * time.Second}, notServing: 1,
			peak: []benchkit.Mem{{HWM: 50 << 20}, {HWM: 60 << 20}}, apiCPU: 1.5, etcdCPU: 0.25, apiPeak: 700 << 20},
		wallclock: time.Minute}
	out := renderRoll("t", []rollRow{r})
	for _, want := range []string{
		"| figure | tether |",
		"| steady, before the rolls: new claim to PV, p50 / p99 | 0.50 s / 0.50 s |",
		"| **roll all at once**: its length; every node serving again | 12.00 s; 12.00 s (1 never) |",
		"| all at once: process start to the PV of a claim made once it synced, median / max | 3.00 s / 5.00 s |",
		"| all at once: process start to the PV of a claim made while it was down, median / max | 7.00 s / 7.00 s |",
		"| all at once: peak RSS (VmHWM), median / max | 50.0 MiB / 60.0 MiB |",
		"| all at once: kube-apiserver / etcd CPU over the roll, cores | 1.50 / 0.25 |",
		"| one at a time, during: new claim to PV, p50 / p99 | - |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if f := r.figures(); f["all_all_serving_seconds"] != 12.0 || f["steady_to_pv_p99_seconds"] != 0.5 || f["all_waited_max_seconds"] != 7.0 {
		t.Errorf("figures: %v", f)
	}
}
