// Package benchnodes measures node-deployment mode at scale (issue 37): one
// API server, BENCH_N claims already provisioned and Bound, spread over
// BENCH_CLUSTER_NODES nodes, and BENCH_NODES node-mode provisioners, each a
// process beside a driver of its own as a DaemonSet's pod would run them,
// each owning the claims of its node. tether's provisioner and
// external-provisioner v6.4.0 (EP) run in turn in the same invocation, on
// the same cluster. Per process: memory after its caches synced and after
// new claims, the time to sync; the new claims' time to a PV; the API
// server's watches and what it sends them during a churn of claim label
// updates. BENCH_BASE=<git ref> runs that commit's provisioner first, as
// "base", to measure a change before and after in one invocation. `make
// bench-nodes`; the test skips itself unless TETHER_BENCH is set.
//
// TestBenchRoll (`make bench-roll`, issue 52) runs the same cluster through a
// DaemonSet roll of each stack's node provisioners, all at once and then one
// at a time, while a stream of new claims comes and goes.
//
//   - populate_test.go: the cluster's objects, written as the real stack
//     leaves them, and the local driver's folders seeded to match.
//   - stack_test.go: one stack's run: drivers, provisioners, the phases.
//   - report_test.go: the pure parts (parsing, statistics, the table) and
//     their tests, which run without TETHER_BENCH.
//   - roll_test.go, stream_test.go: the roll and the stream of claims;
//     rollreport_test.go their pure parts.
package benchnodes

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tether-csi/tether/test/benchkit"
	"github.com/tether-csi/tether/test/benchout"
	"github.com/tether-csi/tether/test/cluster"
	"github.com/tether-csi/tether/test/upgrade"
)

// settings are the knobs, from the environment.
type settings struct {
	n            int // claims in the cluster
	nodes        int // node-mode provisioners per stack
	clusterNodes int // nodes the claims are spread over
	fresh        int // new claims per running node
	churn        int // claim label updates
	qps          int // provisioners' --kube-api-qps (burst twice); 0: their defaults
	conns        int // the setup's concurrent writers
	reserveMiB   int // memory left free when sizing a stack
	timeout      time.Duration
	only         string
	base         string // a git ref whose provisioner runs first, as "base"
	// baseAfter runs base after tether rather than before it
	// (BENCH_BASE_AFTER=1): the order's own effect on the API server
	// shows as the difference between the two orders.
	baseAfter bool
	// memLimitMiB, when set, runs tether's provisioners (not EP's) each in
	// a memory cgroup of that limit, as a container's memory limit would.
	memLimitMiB int
	// pprof, when set, is a folder for CPU profiles of the API server and
	// of the first node's provisioner over the first pprofSeconds of the
	// whole-fleet roll (bench-roll).
	pprof        string
	pprofSeconds int
}

// env is the invocation's cluster, shared by the stacks.
type env struct {
	s          settings
	c          *cluster.Cluster
	kubeconfig string
	config     *rest.Config
	admin      kubernetes.Interface // no client-side rate limit
	apiPID     int
	driverBin  string
	baseBin    string // BENCH_BASE's provisioner
	// roots are the running nodes' driver folders, seeded with their
	// claims' volumes; each stack's drivers start on them.
	roots []string
}

// TestBenchNodes: the cluster once, then each stack in turn.
func TestBenchNodes(t *testing.T) {
	if os.Getenv("TETHER_BENCH") == "" {
		t.Skip("set TETHER_BENCH=1 to run the node-deployment bench (make bench-nodes)")
	}
	s := readSettings(t, 20)
	labels := stackLabels(t, s)
	loadStart := benchkit.LoadAvg()
	e, setup, apiAfterSetup, etcdAfterSetup := setupCluster(t, s, labels)

	var rows []row
	for _, label := range labels {
		started := time.Now()
		var r row
		t.Run(label, func(t *testing.T) { r = runStack(t, e, label) })
		r.wallclock = time.Since(started)
		rows = append(rows, r)
		path, err := benchout.Write(benchout.Run{Bench: "nodes", Label: label, Started: started,
			Settings: map[string]any{"base": s.base, "base_after": s.baseAfter, "claims": s.n, "nodes": s.nodes, "cluster_nodes": s.clusterNodes, "new_per_node": s.fresh,
				"churn": s.churn, "qps": s.qps, "setup_seconds": setup.Seconds()},
			Figures: figures(r)})
		if err != nil {
			t.Error(err)
		} else {
			t.Logf("figures appended to %s", path)
		}
	}
	cmd := fmt.Sprintf("BENCH_N=%d BENCH_NODES=%d BENCH_CLUSTER_NODES=%d BENCH_NEW=%d BENCH_CHURN=%d", s.n, s.nodes, s.clusterNodes, s.fresh, s.churn)
	if s.qps > 0 {
		cmd += fmt.Sprintf(" BENCH_QPS=%d", s.qps)
	}
	if s.only != "" {
		cmd += " BENCH_ONLY=" + s.only
	}
	if s.base != "" {
		cmd += " BENCH_BASE=" + s.base
		if s.baseAfter {
			cmd += " BENCH_BASE_AFTER=1"
		}
	}
	title := fmt.Sprintf("node-deployment mode: %d claims Bound on %d nodes, %d node-mode provisioners (%d claims each), %d new claims per node, %d label updates",
		s.n, s.clusterNodes, s.nodes, s.n/s.clusterNodes, s.fresh, s.churn)
	report := render(title, rows) + fmt.Sprintf("\n`%s make bench-nodes`; %d CPUs; load average %s at the start, %s at the end; "+
		"setup %s (%s claims/s, 4 writes per claim and PV), kube-apiserver VmRSS %s and etcd %s after it\n",
		cmd, numCPU(), loadStart, benchkit.LoadAvg(), setup.Round(time.Second), rate(s.n, setup), mib(apiAfterSetup.RSS), mib(etcdAfterSetup.RSS))
	t.Log("\n" + report)
	fmt.Print(report)
}

// figures are a row's figures for benchout, sizes in bytes and times in
// seconds.
func figures(r row) map[string]any {
	f := map[string]any{"provisioners": r.nodes, "wanted": r.wanted, "owned_per_node": r.owned, "new_claims": r.newClaims,
		"new_failed": r.newFailed, "watches_pvc": r.watchersPVC, "watches_pv": r.watchersPV, "churn": r.churn,
		"churn_pvc_events": r.churnPVC.events, "churn_pvc_bytes": r.churnPVC.bytes, "churn_pv_events": r.churnPV.events,
		"churn_cpu_seconds": r.churnCPU, "apiserver_rss_bytes": r.apiRSS, "apiserver_hwm_bytes": r.apiHWM,
		"error_lines": r.errorLines, "run_seconds": r.wallclock.Seconds()}
	if r.failed != "" {
		f["failed"] = r.failed
	}
	if r.limited != "" {
		f["limited"] = r.limited
	}
	if len(r.synced) > 0 {
		f["synced_p50_seconds"], f["synced_max_seconds"] = benchkit.Percentile(r.synced, 50).Seconds(), benchkit.Percentile(r.synced, 100).Seconds()
	}
	put := func(key string, ms []benchkit.Mem) {
		if len(ms) == 0 {
			return
		}
		rss, hwm, anon, file := make([]int64, len(ms)), make([]int64, len(ms)), make([]int64, len(ms)), make([]int64, len(ms))
		for i, m := range ms {
			rss[i], hwm[i], anon[i], file[i] = m.RSS, m.HWM, m.Anon, m.File
		}
		f[key+"_rss_p50_bytes"], f[key+"_rss_max_bytes"] = benchkit.MedianMax(rss)
		f[key+"_hwm_p50_bytes"], f[key+"_hwm_max_bytes"] = benchkit.MedianMax(hwm)
		f[key+"_rss_anon_p50_bytes"], f[key+"_rss_anon_max_bytes"] = benchkit.MedianMax(anon)
		f[key+"_rss_file_p50_bytes"], f[key+"_rss_file_max_bytes"] = benchkit.MedianMax(file)
	}
	put("synced", r.afterSync)
	put("after_new", r.afterNew)
	if len(r.heapSync) > 0 {
		f["synced_heap_p50_bytes"], f["synced_heap_max_bytes"] = benchkit.MedianMax(r.heapSync)
	}
	if len(r.heapNew) > 0 {
		f["after_new_heap_p50_bytes"], f["after_new_heap_max_bytes"] = benchkit.MedianMax(r.heapNew)
	}
	if len(r.toPV) > 0 {
		f["to_pv_p50_seconds"], f["to_pv_p99_seconds"] = benchkit.Percentile(r.toPV, 50).Seconds(), benchkit.Percentile(r.toPV, 99).Seconds()
	}
	return f
}

// readSettings reads the knobs; nodes is BENCH_NODES's default.
func readSettings(t *testing.T, nodes int) settings {
	s := settings{
		n:            benchkit.Int(t, "BENCH_N", 100000, false),
		nodes:        benchkit.Int(t, "BENCH_NODES", nodes, false),
		clusterNodes: benchkit.Int(t, "BENCH_CLUSTER_NODES", 100, false),
		fresh:        benchkit.Int(t, "BENCH_NEW", 20, true),
		churn:        benchkit.Int(t, "BENCH_CHURN", 1000, true),
		qps:          benchkit.Int(t, "BENCH_QPS", 0, true),
		conns:        benchkit.Int(t, "BENCH_CONNS", 256, false),
		reserveMiB:   benchkit.Int(t, "BENCH_RESERVE_MIB", 6144, false),
		timeout:      benchkit.Duration(t, "BENCH_TIMEOUT", 30*time.Minute),
		only:         os.Getenv("BENCH_ONLY"),
		base:         os.Getenv("BENCH_BASE"),
		baseAfter:    os.Getenv("BENCH_BASE_AFTER") == "1",
		memLimitMiB:  benchkit.Int(t, "BENCH_MEMORY_LIMIT_MIB", 0, true),
		pprof:        os.Getenv("BENCH_PPROF"),
		pprofSeconds: benchkit.Int(t, "BENCH_PPROF_SECONDS", 30, false),
	}
	if s.nodes > s.clusterNodes {
		t.Fatalf("BENCH_NODES=%d is more than BENCH_CLUSTER_NODES=%d", s.nodes, s.clusterNodes)
	}
	return s
}

// stackLabels are the stacks to run, in order: base (BENCH_BASE), tether,
// ep, as BENCH_ONLY narrows them; base just after tether with
// BENCH_BASE_AFTER.
func stackLabels(t *testing.T, s settings) []string {
	labels := []string{"tether", "ep"}
	if s.only != "" {
		if s.only != "tether" && s.only != "ep" {
			t.Fatalf("BENCH_ONLY=%q: tether or ep", s.only)
		}
		labels = []string{s.only}
	}
	if s.base != "" && labels[0] == "tether" {
		// Before and after in one invocation, on the same cluster.
		if s.baseAfter {
			labels = append([]string{"tether", "base"}, labels[1:]...)
		} else {
			labels = append([]string{"base"}, labels...)
		}
	}
	return labels
}

// setupCluster starts the API server, writes the cluster's claims and PVs
// and seeds the running nodes' driver folders; it returns the setup's time
// and the API server's and etcd's memory after it.
func setupCluster(t *testing.T, s settings, labels []string) (e *env, setup time.Duration, apiAfterSetup, etcdAfterSetup benchkit.Mem) {
	e = &env{s: s}
	e.c = cluster.Start(t, cluster.Options{APIServerArgs: map[string][]string{
		"max-requests-inflight": {"2000"}, "max-mutating-requests-inflight": {"1000"},
		// The bench deletes the new claims and their PVs without
		// kube-controller-manager's protection controllers: new objects
		// get no protection finalizer (the ones made as already
		// provisioned are written with theirs).
		"disable-admission-plugins": {"ServiceAccount", "StorageObjectInUseProtection"}}})
	e.kubeconfig, e.config = e.c.AdminTokenKubeconfig(t)
	fast := rest.CopyConfig(e.config)
	fast.QPS, fast.Burst = 20000, 40000
	e.admin = kubernetes.NewForConfigOrDie(fast)
	e.apiPID, _ = e.c.ControlPlanePIDs()
	// Built before the clock starts.
	e.driverBin = cluster.BuildBinary(t, "./examples/local-driver")
	if labels[0] != "ep" {
		cluster.BuildBinary(t, "./cmd/provisioner")
	}
	if s.base != "" {
		e.baseBin = upgrade.BuildRef(t, s.base).Provisioner
	}

	setupStart := time.Now()
	volumes, err := populate(t.Context(), newWriters(e.config), s.n, s.clusterNodes, s.conns, func(done int64) {
		t.Logf("setup: %d of %d claims and PVs after %s", done, s.n, time.Since(setupStart).Round(time.Second))
	})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	for j := range s.nodes {
		dir, err := os.MkdirTemp("", "nb") // socket paths must be short
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		var mine []string
		for i := j; i < s.n; i += s.clusterNodes {
			mine = append(mine, volumes[i])
		}
		if err := seedDriver(filepath.Join(dir, "root"), mine); err != nil {
			t.Fatal(err)
		}
		e.roots = append(e.roots, dir)
	}
	setup = time.Since(setupStart)
	apiAfterSetup = benchkit.ReadMem(e.apiPID)
	_, etcdPID := e.c.ControlPlanePIDs()
	etcdAfterSetup = benchkit.ReadMem(etcdPID)
	t.Logf("setup: %d claims Bound to their PVs on %d nodes, %d drivers seeded, in %s (%s claims/s); kube-apiserver %s, etcd %s",
		s.n, s.clusterNodes, s.nodes, setup.Round(time.Second), rate(s.n, setup), mib(apiAfterSetup.RSS), mib(etcdAfterSetup.RSS))
	return e, setup, apiAfterSetup, etcdAfterSetup
}
