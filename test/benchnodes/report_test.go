package benchnodes

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tether-csi/tether/test/benchkit"
)

// The pure parts of the bench: what it reads from /proc and /metrics, its
// statistics and its report. They run in `make test` without TETHER_BENCH.

// watchLoad is what the API server sent to watchers of one resource over
// a window: events and bytes (apiserver_watch_events_total and
// apiserver_watch_events_sizes_sum deltas).
type watchLoad struct{ events, bytes float64 }

// row is one stack's figures.
type row struct {
	label   string
	failed  string // why it stopped early, if it did
	nodes   int    // provisioners started
	wanted  int    // provisioners asked for (BENCH_NODES)
	limited string // why fewer than wanted ran, if they did
	owned   int    // claims each running node owns

	synced         []time.Duration // start to caches synced, per process
	afterSync      []benchkit.Mem  // per process, once all synced
	afterNew       []benchkit.Mem  // per process, after the new claims
	heapSync       []int64         // go_memstats_heap_inuse_bytes once synced
	heapNew        []int64         // and after the new claims
	newClaims      int
	toPV           []time.Duration // claim created to its PV seen
	toGone         []time.Duration // claim deleted to its PV gone
	newFailed      int             // new claims without a PV, or whose PV stayed
	watchersPVC    float64         // WATCH requests of claims the stack holds open
	watchersPV     float64         // and of PVs
	churn          int             // claim label updates made
	churnOnRunning int             // of which to claims of running nodes
	churnPVC       watchLoad       // sent to claim watchers during the churn
	churnPV        watchLoad       // sent to PV watchers during the churn
	churnCPU       float64         // CPU seconds of all provisioners during the churn
	apiRSS, apiHWM int64           // kube-apiserver, at the end of the stack
	apiRSSSync     int64           // kube-apiserver once the stack synced
	errorLines     int             // klog error lines in the provisioners' logs
	errorKinds     map[string]int  // those lines by kind (errorKind)
	logBytes       int64           // the provisioners' logs, in all
	wallclock      time.Duration   // the stack's whole run
}

func mib(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// memPair is "median / max" of the VmRSS (or VmHWM) of the processes.
func memPair(ms []benchkit.Mem, hwm bool) string {
	if hwm {
		return memOf(ms, func(m benchkit.Mem) int64 { return m.HWM })
	}
	return memOf(ms, func(m benchkit.Mem) int64 { return m.RSS })
}

// memOf is "median / max" of one figure of the processes.
func memOf(ms []benchkit.Mem, figure func(benchkit.Mem) int64) string {
	if len(ms) == 0 {
		return "-"
	}
	v := make([]int64, len(ms))
	for i, m := range ms {
		v[i] = figure(m)
	}
	med, most := benchkit.MedianMax(v)
	return mib(med) + " / " + mib(most)
}

func heapPair(v []int64) string {
	if len(v) == 0 {
		return "-"
	}
	med, most := benchkit.MedianMax(v)
	return mib(med) + " / " + mib(most)
}

// under says how many of the processes stayed under limit bytes of VmHWM.
func under(ms []benchkit.Mem, limit int64) string {
	if len(ms) == 0 {
		return "-"
	}
	n := 0
	for _, m := range ms {
		if m.HWM < limit {
			n++
		}
	}
	return fmt.Sprintf("%d of %d", n, len(ms))
}

func per(v float64, n float64) string {
	if n <= 0 {
		return "-"
	}
	x := v / n
	switch {
	case x == 0:
		return "0"
	case x < 10:
		return fmt.Sprintf("%.3f", x)
	}
	return fmt.Sprintf("%.0f", x)
}

// render prints the rows side by side: a line per figure, a column per
// stack, as a Markdown table.
func render(title string, rows []row) string {
	table := benchkit.NewColumns(rows, func(r row) string { return r.label })
	add := table.Add
	add("provisioners (node-mode processes, each beside its driver)", func(r row) string {
		s := fmt.Sprintf("%d of %d", r.nodes, r.wanted)
		if r.limited != "" {
			s += " (" + r.limited + ")"
		}
		return s
	})
	add("claims each owns", func(r row) string { return strconv.Itoa(r.owned) })
	add("start to caches synced, median / max", func(r row) string {
		if len(r.synced) == 0 {
			return "-"
		}
		return secs(benchkit.Percentile(r.synced, 50)) + " / " + secs(slices.Max(r.synced))
	})
	add("VmRSS after sync, median / max", func(r row) string { return memPair(r.afterSync, false) })
	add("VmRSS after the new claims, median / max", func(r row) string { return memPair(r.afterNew, false) })
	add("of it anonymous (RssAnon: heap, stacks, runtime), median / max", func(r row) string {
		return memOf(r.afterNew, func(m benchkit.Mem) int64 { return m.Anon })
	})
	add("of it the binary's pages (RssFile: shared, reclaimable), median / max", func(r row) string {
		return memOf(r.afterNew, func(m benchkit.Mem) int64 { return m.File })
	})
	add("peak RSS (VmHWM) at the end, median / max", func(r row) string { return memPair(r.afterNew, true) })
	add("processes under 64 MiB peak RSS", func(r row) string { return under(r.afterNew, 64<<20) })
	add("Go heap in use after sync, median / max", func(r row) string { return heapPair(r.heapSync) })
	add("Go heap in use after the new claims, median / max", func(r row) string { return heapPair(r.heapNew) })
	add("new claims (WaitForFirstConsumer, selected node set)", func(r row) string {
		s := strconv.Itoa(r.newClaims)
		if r.newFailed > 0 {
			s += fmt.Sprintf(" (%d failed)", r.newFailed)
		}
		return s
	})
	add("claim created to PV, p50 / p99", func(r row) string {
		if len(r.toPV) == 0 {
			return "-"
		}
		return secs(benchkit.Percentile(r.toPV, 50)) + " / " + secs(benchkit.Percentile(r.toPV, 99))
	})
	add("claim deleted to PV gone, p50 / p99", func(r row) string {
		if len(r.toGone) == 0 {
			return "-"
		}
		return secs(benchkit.Percentile(r.toGone, 50)) + " / " + secs(benchkit.Percentile(r.toGone, 99))
	})
	add("API server: claim / PV watches the stack holds open", func(r row) string {
		return fmt.Sprintf("%.0f / %.0f", r.watchersPVC, r.watchersPV)
	})
	add("churn: claim label updates (to running nodes' claims)", func(r row) string {
		return fmt.Sprintf("%d (%d)", r.churn, r.churnOnRunning)
	})
	add("churn: claim watch events sent per update", func(r row) string { return per(r.churnPVC.events, float64(r.churn)) })
	add("churn: claim watch bytes sent per update", func(r row) string { return per(r.churnPVC.bytes, float64(r.churn)) })
	add("churn: claim watch events per update per provisioner", func(r row) string {
		return per(r.churnPVC.events, float64(r.churn)*float64(r.nodes))
	})
	add("churn: PV watch events sent", func(r row) string { return fmt.Sprintf("%.0f", r.churnPV.events) })
	add("churn: provisioners' CPU per update", func(r row) string {
		if r.churn == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f ms", 1000*r.churnCPU/float64(r.churn))
	})
	add("kube-apiserver VmRSS after sync / at the end (peak)", func(r row) string {
		return mib(r.apiRSSSync) + " / " + mib(r.apiRSS) + " (" + mib(r.apiHWM) + ")"
	})
	add("error lines in the provisioners' logs", func(r row) string { return strconv.Itoa(r.errorLines) })
	add("the stack's run", func(r row) string { return secs(r.wallclock) })

	var b strings.Builder
	b.WriteString("\n### " + title + "\n\n")
	b.WriteString(table.Markdown())
	for _, r := range rows {
		if r.failed != "" {
			fmt.Fprintf(&b, "\n%s stopped early: %s\n", r.label, r.failed)
		}
		if len(r.errorKinds) > 0 {
			fmt.Fprintf(&b, "\n%s's error lines, by kind:\n\n%s", r.label, kindsText(r.errorKinds))
		}
	}
	return b.String()
}

// kindsText lists error kinds, the most frequent first, as Markdown items.
func kindsText(kinds map[string]int) string {
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if kinds[a] != kinds[b] {
			return kinds[b] - kinds[a]
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "- %d× `%s`\n", kinds[k], k)
	}
	return b.String()
}

func TestErrorKind(t *testing.T) {
	a := errorKind(`"Unhandled Error" err="error syncing volume \"pvc-a512eb1a-9f1b-4d02-99c0-ded9f305664a\": not found"`)
	b := errorKind(`"Unhandled Error" err="error syncing volume \"pvc-21bfec4b-cf5d-406c-bf25-037c9eca28b9\": not found"`)
	if a != b || strings.Contains(a, "a512") {
		t.Errorf("%q and %q", a, b)
	}
	if c := errorKind("update for {segment:0x3e74dfd6d800} csisc-5zvjw data-db-000123"); c != "update for {segment:…} … …" {
		t.Errorf("%q", c)
	}
}

func TestRender(t *testing.T) {
	rows := []row{
		{label: "tether", nodes: 2, wanted: 2, owned: 1000, synced: []time.Duration{2 * time.Second, 4 * time.Second},
			afterSync: []benchkit.Mem{{RSS: 40 << 20, HWM: 50 << 20}, {RSS: 44 << 20, HWM: 70 << 20}},
			afterNew:  []benchkit.Mem{{RSS: 41 << 20, HWM: 50 << 20}, {RSS: 45 << 20, HWM: 70 << 20}},
			heapSync:  []int64{10 << 20, 12 << 20}, newClaims: 40, toPV: []time.Duration{time.Second, 3 * time.Second},
			watchersPVC: 2, watchersPV: 2, churn: 1000, churnOnRunning: 20,
			churnPVC: watchLoad{events: 2000, bytes: 3e6}, churnCPU: 1.5, apiRSS: 1 << 30, apiHWM: 2 << 30},
		{label: "ep", nodes: 1, wanted: 2, limited: "memory", failed: "boom", errorLines: 3,
			errorKinds: map[string]int{"b": 1, "a": 2}},
	}
	out := render("node mode", rows)
	for _, want := range []string{
		"| figure | tether | ep |", "|---|---|---|",
		"| provisioners (node-mode processes, each beside its driver) | 2 of 2 | 1 of 2 (memory) |",
		"| start to caches synced, median / max | 2.00 s / 4.00 s | - |",
		"| VmRSS after sync, median / max | 40.0 MiB / 44.0 MiB | - |",
		"| processes under 64 MiB peak RSS | 1 of 2 | - |",
		"| claim created to PV, p50 / p99 | 1.00 s / 3.00 s | - |",
		"| churn: claim watch events sent per update | 2.000 | - |",
		"| churn: claim watch bytes sent per update | 3000 | - |",
		"| churn: claim watch events per update per provisioner | 1.000 | - |",
		"| churn: provisioners' CPU per update | 1.50 ms | - |",
		"ep stopped early: boom",
		"ep's error lines, by kind:\n\n- 2× `a`\n- 1× `b`\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestStackLabels(t *testing.T) {
	for _, c := range []struct {
		s    settings
		want string
	}{
		{settings{}, "tether,ep"},
		{settings{only: "ep"}, "ep"},
		{settings{only: "ep", base: "v1"}, "ep"},
		{settings{base: "v1"}, "base,tether,ep"},
		{settings{base: "v1", only: "tether"}, "base,tether"},
		{settings{base: "v1", only: "tether", baseAfter: true}, "tether,base"},
		{settings{base: "v1", baseAfter: true}, "tether,base,ep"},
	} {
		if got := strings.Join(stackLabels(t, c.s), ","); got != c.want {
			t.Errorf("%+v: %s, want %s", c.s, got, c.want)
		}
	}
}
