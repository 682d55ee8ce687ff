package benchnodes

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tether-csi/tether/test/benchkit"
	"github.com/tether-csi/tether/test/benchout"
)

// rollSettings are bench-roll's own knobs.
type rollSettings struct {
	rate   float64       // stream claims a second (BENCH_ROLL_RATE)
	life   time.Duration // a stream claim's life once bound (BENCH_ROLL_LIFE)
	window time.Duration // the steady windows before and after each roll (BENCH_ROLL_WINDOW)
}

// TestBenchRoll: the node-mode cluster of TestBenchNodes, then for each
// stack a DaemonSet roll of its node provisioners, as Kubernetes rolls a
// driver's pods, while a stream of new claims and deletions goes on:
// first all at once, then one node at a time (the next once the last
// serves again). `make bench-roll`; it skips itself unless TETHER_BENCH is
// set.
func TestBenchRoll(t *testing.T) {
	if os.Getenv("TETHER_BENCH") == "" {
		t.Skip("set TETHER_BENCH=1 to run the roll bench (make bench-roll)")
	}
	s := readSettings(t, 7)
	rs := rollSettings{
		rate:   float64(benchkit.Int(t, "BENCH_ROLL_RATE", 5, false)),
		life:   benchkit.Duration(t, "BENCH_ROLL_LIFE", 5*time.Second),
		window: benchkit.Duration(t, "BENCH_ROLL_WINDOW", 30*time.Second),
	}
	labels := stackLabels(t, s)
	loadStart := benchkit.LoadAvg()
	e, setup, apiAfterSetup, etcdAfterSetup := setupCluster(t, s, labels)

	var rows []rollRow
	for _, label := range labels {
		started := time.Now()
		var r rollRow
		t.Run(label, func(t *testing.T) { r = rollStack(t, e, label, rs) })
		r.label, r.wallclock = label, time.Since(started)
		rows = append(rows, r)
		path, err := benchout.Write(benchout.Run{Bench: "roll", Label: label, Started: started,
			Settings: map[string]any{"base": s.base, "base_after": s.baseAfter, "memory_limit_mib": s.memLimitMiB, "claims": s.n, "nodes": s.nodes, "cluster_nodes": s.clusterNodes,
				"rate": rs.rate, "life_seconds": rs.life.Seconds(), "window_seconds": rs.window.Seconds(), "setup_seconds": setup.Seconds()},
			Figures: r.figures()})
		if err != nil {
			t.Error(err)
		} else {
			t.Logf("figures appended to %s", path)
		}
	}
	cmd := fmt.Sprintf("BENCH_N=%d BENCH_NODES=%d BENCH_CLUSTER_NODES=%d BENCH_ROLL_RATE=%g BENCH_ROLL_LIFE=%s BENCH_ROLL_WINDOW=%s",
		s.n, s.nodes, s.clusterNodes, rs.rate, rs.life, rs.window)
	if s.only != "" {
		cmd += " BENCH_ONLY=" + s.only
	}
	if s.base != "" {
		cmd += " BENCH_BASE=" + s.base
		if s.baseAfter {
			cmd += " BENCH_BASE_AFTER=1"
		}
	}
	if s.memLimitMiB > 0 {
		cmd += fmt.Sprintf(" BENCH_MEMORY_LIMIT_MIB=%d", s.memLimitMiB)
	}
	title := fmt.Sprintf("driver roll: %d claims Bound on %d nodes, %d node-mode provisioners (%d claims each), a stream of %g new claims a second",
		s.n, s.clusterNodes, s.nodes, s.n/s.clusterNodes, rs.rate)
	report := renderRoll(title, rows) + fmt.Sprintf("\n`%s make bench-roll`; %d CPUs; load average %s at the start, %s at the end; "+
		"setup %s, kube-apiserver VmRSS %s and etcd %s after it\n",
		cmd, numCPU(), loadStart, benchkit.LoadAvg(), setup.Round(time.Second), benchkit.MiB(apiAfterSetup.RSS), benchkit.MiB(etcdAfterSetup.RSS))
	t.Log("\n" + report)
	fmt.Print(report)
}

// rollStack runs one stack through both rolls.
func rollStack(t *testing.T, e *env, label string, rs rollSettings) rollRow {
	s := e.s
	r := rollRow{nodes: s.nodes}
	path := provisionerPath(t, e, label)
	pods := startDrivers(t, e, label)
	defer stopPods(pods)
	for _, p := range pods {
		startProvisioner(t, e, label, path, p)
	}
	if err := waitSynced(t.Context(), pods, s.timeout); err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	// The steady window starts once every listing behind the watch has
	// caught up, as it starts for a stack that lists whole.
	if err := waitCaughtUp(t.Context(), pods, s.timeout); err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	nodes := make([]string, len(pods))
	for i, p := range pods {
		nodes[i] = p.node
	}
	st := startStream(t, e, label, nodes, rs.rate, rs.life)

	r.steady = window{from: time.Now()}
	hold(t, rs.window)
	r.steady.to = time.Now()

	// (a) The whole fleet at once: every pod deleted, then every new one
	// started, as a DaemonSet with maxUnavailable 100% does.
	r.all = runRoll(t, e, st, label, path, pods, true)
	r.afterAll = window{from: time.Now()}
	hold(t, rs.window)
	r.afterAll.to = time.Now()
	r.all.rest = memNow(pods)

	// (b) One node at a time (maxUnavailable 1), the next once the last
	// serves again (provisioned a claim made once it synced).
	r.one = runRoll(t, e, st, label, path, pods, false)
	r.afterOne = window{from: time.Now()}
	hold(t, rs.window)
	r.afterOne.to = time.Now()
	r.one.rest = memNow(pods)

	r.claims, r.errs = st.Stop(rs.life + 2*time.Minute)
	for _, msg := range r.errs {
		t.Errorf("%s: stream: %s", label, msg)
	}
	for _, p := range pods {
		if !p.proc.Running() {
			t.Errorf("%s: the provisioner of %s exited (log %s)", label, p.node, p.proc.LogPath)
		}
	}
	return r
}

// runRoll restarts every provisioner, all at once or one at a time, and
// measures it: each process's start to its caches synced, to the PV of a
// claim made on its node once it synced (a probe: it serves again), to
// the PV of one made while it was down (a probe: what a claim waits that
// a roll's gap left waiting) and to its listings caught up (tether's,
// behind the watch), its peak memory, and the API server's and etcd's CPU
// and memory over the roll, which ends once every listing has caught up.
func runRoll(t *testing.T, e *env, st *stream, label, path string, pods []*prov, all bool) roll {
	apiPID, etcdPID := e.c.ControlPlanePIDs()
	pids := map[string]int{"kube-apiserver": apiPID, "etcd": etcdPID}
	var rl roll
	rl.window.from = time.Now()
	cpu0, m0 := benchkit.ReadCPU(pids), e.apiMetrics(t)
	stopSampling := sampleMem(pids, &rl.apiPeak, &rl.etcdPeak)
	marks := startMarks(t.Context(), pods)
	// Each node's probes: made while it was down, made once it synced.
	waiting, fresh := make([]string, len(pods)), make([]string, len(pods))
	start := func(i int) {
		marks.restart(i, func() { startProvisioner(t, e, label, path, pods[i]) })
	}
	wait := func(i int) {
		if err := marks.synced(t.Context(), i, e.s.timeout); err != nil {
			t.Errorf("%s: the provisioner of %s: %v", label, pods[i].node, err)
		}
		fresh[i] = st.Probe(pods[i].node)
		if err := waitSeen(t, st, fresh[i], e.s.timeout); err != nil {
			t.Errorf("%s: the provisioner of %s: %v", label, pods[i].node, err)
		}
	}
	if all {
		var wg sync.WaitGroup
		for i := range pods {
			wg.Go(func() { pods[i].proc.Stop(30 * time.Second) })
		}
		wg.Wait()
		for i, p := range pods {
			waiting[i] = st.Probe(p.node)
		}
		for i := range pods {
			start(i)
		}
		if e.s.pprof != "" {
			// The API server serving the fleet's listings, and one of them.
			profiled := map[string]string{"provisioner-" + pods[0].node: pods[0].metrics}
			defer e.c.CPUProfiles(t, e.s.pprof, label+"-roll-all", e.s.pprofSeconds, profiled)()
		}
		for i := range pods {
			wait(i)
		}
	} else {
		for i, p := range pods {
			p.proc.Stop(30 * time.Second) // SIGTERM, as the kubelet stops a pod
			waiting[i] = st.Probe(p.node)
			start(i)
			wait(i)
		}
	}
	// The roll is over once every node's listing has caught up too (and
	// the claims left waiting have their PVs): what it costs in memory
	// and in the API server's CPU counts.
	for i, name := range waiting {
		if err := waitSeen(t, st, name, e.s.timeout); err != nil {
			t.Errorf("%s: the provisioner of %s: %v", label, pods[i].node, err)
		}
	}
	if err := marks.allCaughtUp(t.Context(), e.s.timeout); err != nil {
		t.Errorf("%s: %v", label, err)
	}
	rl.window.to = time.Now()
	cpu1, m1 := benchkit.ReadCPU(pids), e.apiMetrics(t)
	stopSampling()
	for _, res := range []string{"persistentvolumeclaims", "persistentvolumes"} {
		match := map[string]string{"resource": res}
		rl.listsCache += benchkit.MetricSum(m1, "apiserver_cache_list_total", match) - benchkit.MetricSum(m0, "apiserver_cache_list_total", match)
		rl.listsEtcd += benchkit.MetricSum(m1, "apiserver_storage_list_total", match) - benchkit.MetricSum(m0, "apiserver_storage_list_total", match)
	}
	secs := rl.window.to.Sub(rl.window.from).Seconds()
	rl.apiCPU = float64(cpu1.ByProgram["kube-apiserver"]-cpu0.ByProgram["kube-apiserver"]) / 100 / secs
	rl.etcdCPU = float64(cpu1.ByProgram["etcd"]-cpu0.ByProgram["etcd"]) / 100 / secs
	for i, p := range pods {
		if !p.syncedAt.IsZero() {
			rl.synced = append(rl.synced, p.syncedAt.Sub(p.started))
		}
		if !p.caughtUpAt.IsZero() {
			rl.caughtUp = append(rl.caughtUp, p.caughtUpAt.Sub(p.started))
		}
		if seen := st.seen(fresh[i]); !seen.IsZero() {
			rl.serving = append(rl.serving, seen.Sub(p.started))
			rl.allServing = max(rl.allServing, seen.Sub(rl.window.from))
		} else {
			rl.notServing++
		}
		if seen := st.seen(waiting[i]); !seen.IsZero() {
			rl.waited = append(rl.waited, seen.Sub(p.started))
		} else {
			rl.notServing++
		}
		rl.peak = append(rl.peak, benchkit.ReadMem(p.proc.Pid()))
	}
	t.Logf("%s: roll (all at once: %t) done in %s; every provisioner serving again %s after the roll began",
		label, all, rl.window.to.Sub(rl.window.from).Round(time.Millisecond), rl.allServing.Round(time.Millisecond))
	return rl
}

// waitSeen waits until the stream saw the claim's PV.
func waitSeen(t *testing.T, st *stream, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for st.seen(name).IsZero() {
		if time.Now().After(deadline) {
			return fmt.Errorf("no PV for %s within %s", name, timeout)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-t.Context().Done():
			return t.Context().Err()
		}
	}
	return nil
}

// memNow reads each provisioner's memory now.
func memNow(pods []*prov) []benchkit.Mem {
	var ms []benchkit.Mem
	for _, p := range pods {
		ms = append(ms, benchkit.ReadMem(p.proc.Pid()))
	}
	return ms
}

// sampleMem reads the processes' VmRSS every second into their peaks
// until the returned function is called.
func sampleMem(pids map[string]int, api, etcd *int64) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			*api = max(*api, benchkit.ReadMem(pids["kube-apiserver"]).RSS)
			*etcd = max(*etcd, benchkit.ReadMem(pids["etcd"]).RSS)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
