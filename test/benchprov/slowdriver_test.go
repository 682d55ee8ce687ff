package benchprov

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/test/bench"
	"github.com/tether-csi/tether/test/benchout"
	"github.com/tether-csi/tether/test/cluster"

	"github.com/tether-csi/tether/test/benchkit"
)

// make bench-slowdriver: claims through a driver that spends seconds in
// every CreateVolume and DeleteVolume (slowBackend in front of the mock),
// tether's binder and provisioner against KCM's binder and
// external-provisioner v6.4.0. Two cases, each one invocation:
//
//   - slow: BENCH_N claims (1000), BENCH_LATENCY (2s) per call; both
//     pairs at their shipped defaults, then at equal settings (BENCH_QPS,
//     burst twice that, for every component; --worker-threads
//     BENCH_WORKERS, the CSI calls in flight, for both provisioners), and
//     the floor (no component: the pipeline's API writes from a plain
//     client). The limit the calls in flight allow is N / in flight (rounded up) x
//     latency, plus the floor's API time.
//   - slower: BENCH_SLOWER_N claims (200), BENCH_SLOWER_LATENCY (30s) per
//     call against a --timeout of 10s (EP's default) for both, at the
//     equal settings: CreateVolume calls per claim, calls at work at once
//     per claim, volumes made per claim. The driver's own time is N / in
//     flight x latency.
//
// BENCH_CASE (slow,slower) picks the cases, BENCH_ONLY the pairs (tether,
// upstream, floor, or labels), BENCH_ETCD_DELAY the etcd delay (default 0
// here: the driver sets the pace), BENCH_JITTER a spread of each call's
// latency (0.2: from 0.8 to 1.2 times it, by a hash of the volume's name;
// default none, every call in lockstep). Claims and PVs get no protection
// finalizers (the StorageObjectInUseProtection admission plugin is off):
// deletion is the binder's and the provisioner's work alone.

// slowerTimeout is both provisioners' --timeout in the slower case.
const slowerTimeout = 10 * time.Second

// epDefaultWorkers is external-provisioner's --worker-threads default
// (tether's is the same).
const epDefaultWorkers = 100

type slowPair struct {
	name            string // "tether", "upstream" or "floor"
	qps, workers    int    // 0: the component's default
	timeout         time.Duration
	upstream, floor bool
}

func (p slowPair) label() string {
	switch {
	case p.floor:
		return "floor"
	case p.qps == 0 && p.workers == 0:
		return p.name + "@defaults"
	}
	return fmt.Sprintf("%s@qps%d@w%d", p.name, p.qps, p.workers)
}

// inFlight is how many CSI calls the pair's provisioner makes at once.
func (p slowPair) inFlight() int {
	if p.workers > 0 {
		return p.workers
	}
	return epDefaultWorkers
}

// slowRow is one measured run.
type slowRow struct {
	pair    slowPair
	n       int
	latency time.Duration
	started time.Time
	// Creation to Bound, claim deleted to PV gone.
	bound, boundP50, boundP99       time.Duration
	deleted, deletedP50, deletedP99 time.Duration
	creates, deletes                backendFigures
	// peak: the backend's most calls at work at once; left: volumes it
	// still holds after the run.
	peak, left         int
	binderRSS, provRSS int64
	// API requests per claim, to all Bound and then to all deleted.
	createRequests, deleteRequests map[string]float64
	cpu                            string
	failed                         string
	trace                          *deleteTrace // each volume's deletion stages
}

func TestBenchSlowDriver(t *testing.T) {
	if !benchEnabled() {
		t.Skip("set TETHER_BENCH=1 to run the slow-driver bench (make bench-slowdriver)")
	}
	qps, workers := benchkit.Int(t, "BENCH_QPS", 2000, false), benchkit.Int(t, "BENCH_WORKERS", epDefaultWorkers, false)
	delays := os.Getenv("BENCH_ETCD_DELAY")
	if delays == "" {
		delays = "0"
	}
	ds, err := bench.ParseDelays(delays)
	if err != nil {
		t.Fatalf("BENCH_ETCD_DELAY: %v", err)
	}
	cases := os.Getenv("BENCH_CASE")
	if cases == "" {
		cases = "slow,slower"
	}
	for _, name := range strings.Split(cases, ",") {
		var n int
		var latency time.Duration
		var pairs []slowPair
		switch name {
		case "slow":
			n, latency = benchkit.Int(t, "BENCH_N", 1000, false), benchkit.Duration(t, "BENCH_LATENCY", 2*time.Second)
			pairs = []slowPair{{name: "tether"}, {name: "upstream", upstream: true},
				{name: "tether", qps: qps, workers: workers}, {name: "upstream", qps: qps, workers: workers, upstream: true},
				{name: "floor", floor: true}}
		case "slower":
			n, latency = benchkit.Int(t, "BENCH_SLOWER_N", 200, false), benchkit.Duration(t, "BENCH_SLOWER_LATENCY", 30*time.Second)
			pairs = []slowPair{{name: "tether", qps: qps, workers: workers, timeout: slowerTimeout},
				{name: "upstream", qps: qps, workers: workers, timeout: slowerTimeout, upstream: true}}
		default:
			t.Fatalf("BENCH_CASE: unknown case %q (want slow, slower)", name)
		}
		for _, delay := range ds {
			var rows []slowRow
			for _, p := range pairs {
				if !selected(pair{name: p.name}, p.label()) {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/delay%s", name, p.label(), delay), func(t *testing.T) {
					r := runSlow(t, p, n, latency, delay)
					rows = append(rows, r)
					writeSlowRow(t, name, delay, r)
				})
			}
			report := renderSlow(name, n, latency, delay, rows)
			t.Log("\n" + report)
			fmt.Print(report)
		}
	}
}

func runSlow(t *testing.T, p slowPair, n int, latency, delay time.Duration) slowRow {
	r := slowRow{pair: p, n: n, latency: latency, started: time.Now()}
	c := cluster.Start(t, cluster.Options{EtcdDelay: delay, APIServerArgs: map[string][]string{
		"max-requests-inflight": {"2000"}, "max-mutating-requests-inflight": {"1000"},
		// No protection finalizers: no KCM protection controller runs.
		"disable-admission-plugins": {"ServiceAccount,StorageObjectInUseProtection"}}})
	bc := benchClients(t, c)
	var binder, prov *cluster.Process
	var backend *slowBackend
	if !p.floor {
		binder, prov, backend = startSlowPair(t, c, p, bc, latency)
	}
	mode := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Provisioner: driverName, VolumeBindingMode: &mode}
	if _, err := c.Client.StorageV1().StorageClasses().Create(t.Context(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apiPID, etcdPID := c.ControlPlanePIDs()
	pids := cpuPIDs(pair{upstream: p.upstream}, apiPID, etcdPID, binder, prov)
	cpuBefore := benchkit.ReadCPU(pids)
	before := apiRequests(t, c)
	var after func(context.Context, int, *corev1.PersistentVolumeClaim) error
	if p.floor {
		after = floorWrites(bc.config)
	}
	lat, total, err := createAndWait(t, bc.config, n, func(i int) *corev1.PersistentVolumeClaim { return claim(i, "bench") }, nil, after)
	if err != nil {
		r.failed = "to all Bound: " + err.Error()
		t.Error(err)
		return r
	}
	r.bound, r.boundP50, r.boundP99 = total, benchkit.Percentile(lat, 50), benchkit.Percentile(lat, 99)
	mid := apiRequests(t, c)
	r.createRequests = bench.PerClaim(before, mid, n)

	var gone func(context.Context, *corev1.PersistentVolume) error
	if p.floor {
		gone = floorDeleteWrites(bc.config)
	}
	r.trace = newDeleteTrace()
	if backend != nil {
		backend.setTrace(r.trace)
	}
	lat, total, err = deleteAndWait(t, bc.config, n, gone, r.trace)
	if err != nil {
		r.failed = "to all deleted: " + err.Error()
		t.Error(err)
		return r
	}
	r.deleted, r.deletedP50, r.deletedP99 = total, benchkit.Percentile(lat, 50), benchkit.Percentile(lat, 99)
	r.deleteRequests = bench.PerClaim(mid, apiRequests(t, c), n)
	r.cpu = benchkit.CPUUse(cpuBefore, benchkit.ReadCPU(pids), n)
	r.binderRSS, r.provRSS = peakRSS(binder), peakRSS(prov)
	if backend != nil {
		// Calls whose callers gave up may still be at work: their counts
		// belong to the run.
		err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 2*latency+time.Minute, true, func(context.Context) (bool, error) {
			_, _, _, busy, _ := backend.figures()
			return busy == 0, nil
		})
		if err != nil {
			t.Errorf("the backend's calls did not end: %v", err)
		}
		r.creates, r.deletes, r.left, _, r.peak = backend.figures()
	}
	return r
}

// startSlowPair starts the mock driver, the slow backend in front of it,
// and the pair's binder and provisioner on the backend's socket.
func startSlowPair(t *testing.T, c *cluster.Cluster, p slowPair, bc clients, latency time.Duration) (binder, prov *cluster.Process, backend *slowBackend) {
	mock, err := cluster.Tool("mock-driver")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "bench")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "csi.sock")
	c.Run(t, cluster.ProcessOptions{Name: "mock", Path: mock, Args: []string{"-name=" + driverName, "-v=1"},
		Env: []string{"CSI_ENDPOINT=unix://" + socket}})
	if err := waitSocket(t, socket); err != nil {
		t.Fatal(err)
	}
	backend = startSlowBackend(t, socket, latency)
	if j := os.Getenv("BENCH_JITTER"); j != "" {
		if backend.jitter, err = strconv.ParseFloat(j, 64); err != nil || backend.jitter < 0 || backend.jitter >= 1 {
			t.Fatalf("BENCH_JITTER=%q: want a fraction from 0 to below 1", j)
		}
	}
	var clientArgs, provArgs []string
	if p.qps > 0 {
		clientArgs = []string{fmt.Sprintf("--kube-api-qps=%d", p.qps), fmt.Sprintf("--kube-api-burst=%d", 2*p.qps)}
	}
	if p.workers > 0 {
		provArgs = append(provArgs, fmt.Sprintf("--worker-threads=%d", p.workers))
	}
	if p.timeout > 0 {
		provArgs = append(provArgs, "--timeout="+p.timeout.String())
	}
	provArgs = append(append([]string{"--kubeconfig=" + bc.kubeconfig, "--csi-address=" + backend.Socket, "--leader-election=false", "-v=1"},
		clientArgs...), provArgs...)
	if p.upstream {
		// The later --kubeconfig wins over the cluster's own.
		binder = c.StartControllerManager(t, []string{"persistentvolume-binder-controller"}, append(clientArgs, "--kubeconfig="+bc.kubeconfig)...)
		ep, err := cluster.Tool("csi-provisioner")
		if err != nil {
			t.Fatal(err)
		}
		prov = c.Run(t, cluster.ProcessOptions{Name: "external-provisioner", Path: ep, Args: provArgs})
		return binder, prov, backend
	}
	binder = c.Run(t, cluster.ProcessOptions{Name: "binder", Path: cluster.BuildBinary(t, "./cmd/binder"),
		Args: append([]string{"--kubeconfig=" + bc.kubeconfig, "--leader-elect=false", "-v=1"}, clientArgs...)})
	prov = c.Run(t, cluster.ProcessOptions{Name: "provisioner", Path: cluster.BuildBinary(t, "./cmd/provisioner"), Args: provArgs})
	return binder, prov, backend
}

// waitSocket waits until the mock serves its socket (the backend dials it
// lazily, but its first calls should not meet a missing socket).
func waitSocket(t *testing.T, path string) error {
	return wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := os.Stat(path)
		return err == nil, nil
	})
}

// floorDeleteWrites makes, for a claim just deleted, the writes of the
// pipeline that delete its PV: the binder's Released phase, then the
// provisioner's removal of its finalizer and deletion of the PV.
func floorDeleteWrites(config *rest.Config) func(context.Context, *corev1.PersistentVolume) error {
	binder, prov := bench.FloorClient(config, "binder"), bench.FloorClient(config, "provisioner")
	return func(ctx context.Context, pv *corev1.PersistentVolume) error {
		p := pv.DeepCopy()
		p.Status.Phase = corev1.VolumeReleased
		p, err := binder.CoreV1().PersistentVolumes().UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("volume %s Released: %w", pv.Name, err)
		}
		p.Finalizers = nil
		if p, err = prov.CoreV1().PersistentVolumes().Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("volume %s finalizer: %w", pv.Name, err)
		}
		return prov.CoreV1().PersistentVolumes().Delete(ctx, p.Name, metav1.DeleteOptions{})
	}
}

// deleteAndWait deletes the n claims (64 at a time), and waits until a
// watch has seen every PV gone. Latencies run from each claim's deletion
// to its PV gone. gone, if set, runs for each claim's PV once the claim is
// deleted (the floor's writes), on a goroutine of its own.
func deleteAndWait(t *testing.T, config *rest.Config, n int, gone func(context.Context, *corev1.PersistentVolume) error, trace *deleteTrace) ([]time.Duration, time.Duration, error) {
	ctx := t.Context()
	fast := rest.CopyConfig(config)
	fast.QPS, fast.Burst = 20000, 40000
	admin := kubernetes.NewForConfigOrDie(fast)
	factory := informers.NewSharedInformerFactory(admin, 0)
	inf := factory.Core().V1().PersistentVolumes().Informer()
	var mu sync.Mutex
	goneAt := map[string]time.Time{}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Status.Phase == corev1.VolumeReleased {
			trace.mark(trace.released, pv.Name, time.Now())
		}
	}, DeleteFunc: func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pv, ok := obj.(*corev1.PersistentVolume); ok {
			now := time.Now()
			trace.mark(trace.gone, pv.Name, now)
			mu.Lock()
			goneAt[pv.Name] = now
			mu.Unlock()
		}
	}}); err != nil {
		return nil, 0, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	factory.Start(watchCtx.Done())
	defer factory.Shutdown()
	defer stopWatch()
	cache.WaitForCacheSync(watchCtx.Done(), inf.HasSynced)
	volumeOf := map[string]*corev1.PersistentVolume{} // by claim name
	for _, obj := range inf.GetStore().List() {
		if pv := obj.(*corev1.PersistentVolume); pv.Spec.ClaimRef != nil {
			volumeOf[pv.Spec.ClaimRef.Name] = pv
		}
	}
	if len(volumeOf) != n {
		return nil, 0, fmt.Errorf("%d PVs with a claim, want %d", len(volumeOf), n)
	}
	deletedAt := map[string]time.Time{} // by PV name
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	sem := make(chan struct{}, 64)
	for i := range n {
		name := claim(i, "").Name
		pv := volumeOf[name]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			now := time.Now()
			trace.mark(trace.claimDeleted, pv.Name, now)
			mu.Lock()
			deletedAt[pv.Name] = now
			mu.Unlock()
			if err := admin.CoreV1().PersistentVolumeClaims("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				errs <- err
				return
			}
			if gone != nil {
				wg.Go(func() {
					if err := gone(ctx, pv); err != nil {
						errs <- err
					}
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return nil, 0, err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(goneAt) >= n, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		return nil, time.Since(start), fmt.Errorf("%d of %d PVs gone: %w", len(goneAt), n, err)
	}
	var lat []time.Duration
	last := start
	for name, at := range goneAt {
		if d, ok := deletedAt[name]; ok {
			lat = append(lat, at.Sub(d))
		}
		if at.After(last) {
			last = at
		}
	}
	return lat, last.Sub(start), nil
}

// renderSlow prints one case: the limit, each pair's times, the backend's
// counts, and the goals.
func renderSlow(name string, n int, latency, delay time.Duration, rows []slowRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "slow-driver bench, case %q: %d claims (1Gi, Immediate, Delete); CreateVolume and DeleteVolume take %s each", name, n, latency)
	if j := os.Getenv("BENCH_JITTER"); j != "" {
		fmt.Fprintf(&b, ", spread by +-%s of it (BENCH_JITTER)", j)
	}
	b.WriteString("\n")
	b.WriteString("in a backend that takes calls at once and goes on after its caller gave up (test/benchprov/slowbackend_test.go).\n")
	b.WriteString("All bound: first claim's creation to the last seen Bound; all deleted: first claim's deletion to the last PV gone.\n")
	b.WriteString("p50/p99 per claim: its creation to Bound; its deletion to its PV gone. RSS is VmHWM.\n")
	b.WriteString(bench.DelayLabel(delay) + "\n")
	var floor *slowRow
	for i := range rows {
		if rows[i].pair.floor && rows[i].failed == "" {
			floor = &rows[i]
		}
	}
	// The limit the calls in flight allow, for each in-flight count.
	limits := func(inFlight int) (create, del time.Duration) {
		csi := driverTime(n, inFlight, latency)
		create, del = csi, csi
		if floor != nil {
			create += floor.bound
			del += floor.deleted
		}
		return create, del
	}
	for _, w := range inFlights(rows) {
		c, d := limits(w)
		fmt.Fprintf(&b, "Limit at %d calls in flight: %d / %d (rounded up) x %s = %s", w, n, w, latency, sec(driverTime(n, w, latency)))
		if floor != nil {
			fmt.Fprintf(&b, "; with the floor's API time added, %s to all Bound (floor %s), %s to all deleted (floor %s)",
				sec(c), sec(floor.bound), sec(d), sec(floor.deleted))
		}
		b.WriteString(".\n")
	}
	f := "%-22s %9s %10s %8s %8s %8s %12s %8s %8s %8s %11s %11s\n"
	fmt.Fprintf(&b, f, "pair", "in flight", "all bound", "x limit", "p50", "p99", "all deleted", "x limit", "p50", "p99", "binder RSS", "prov. RSS")
	for _, r := range rows {
		if r.failed != "" {
			fmt.Fprintf(&b, "%-22s failed: %s\n", r.pair.label(), r.failed)
			continue
		}
		inFlight, xc, xd := "-", "-", "-"
		if !r.pair.floor {
			c, d := limits(r.pair.inFlight())
			inFlight = fmt.Sprint(r.pair.inFlight())
			xc, xd = fmt.Sprintf("%.2fx", r.bound.Seconds()/c.Seconds()), fmt.Sprintf("%.2fx", r.deleted.Seconds()/d.Seconds())
		}
		fmt.Fprintf(&b, f, r.pair.label(), inFlight, sec(r.bound), xc, sec(r.boundP50), sec(r.boundP99),
			sec(r.deleted), xd, sec(r.deletedP50), sec(r.deletedP99), mib(r.binderRSS), mib(r.provRSS))
	}
	b.WriteString("The backend's counts: CreateVolume calls per claim (mean, max); the most calls at work at once for one claim\n")
	b.WriteString("(claims with two or more); volumes made per claim (max; claims made twice or more); the same for DeleteVolume;\n")
	b.WriteString("the backend's most calls at work at once; volumes left on it.\n")
	g := "%-22s %11s %13s %11s %11s %13s %11s %6s %5s\n"
	fmt.Fprintf(&b, g, "pair", "create calls", "at once", "made", "delete calls", "at once", "deletions", "peak", "left")
	for _, r := range rows {
		if r.failed != "" || r.pair.floor {
			continue
		}
		c, d := r.creates, r.deletes
		fmt.Fprintf(&b, g, r.pair.label(), fmt.Sprintf("%.2f, %d", c.perVolume(c.calls), c.maxCalls), fmt.Sprintf("%d (%d)", c.maxAtWork, c.multiAtWork),
			fmt.Sprintf("%d (%d)", c.maxStarted, c.multiStarted), fmt.Sprintf("%.2f, %d", d.perVolume(d.calls), d.maxCalls),
			fmt.Sprintf("%d (%d)", d.maxAtWork, d.multiAtWork), fmt.Sprintf("%d (%d)", d.maxStarted, d.multiStarted), fmt.Sprint(r.peak), fmt.Sprint(r.left))
	}
	b.WriteString(slowGoals(name, n, latency, rows, limits))
	b.WriteString(renderStages(rows))
	for _, r := range rows {
		if r.failed != "" {
			continue
		}
		fmt.Fprintf(&b, "%s to all Bound: %s\n", r.pair.label(), requestsLine(r.createRequests))
		fmt.Fprintf(&b, "%s to all deleted: %s\n", r.pair.label(), requestsLine(r.deleteRequests))
		if r.cpu != "" {
			fmt.Fprintf(&b, "%s: %s\n", r.pair.label(), r.cpu)
		}
	}
	return b.String()
}

// requestsLine renders per-claim requests as bench.RequestsPerClaim does.
func requestsLine(perClaim map[string]float64) string {
	before := map[string]float64{}
	return bench.RequestsPerClaim(before, perClaim, 1)
}

// driverTime is the time the driver needs for n calls, inFlight at a
// time: N / in flight, rounded up, x latency.
func driverTime(n, inFlight int, latency time.Duration) time.Duration {
	return time.Duration((n+inFlight-1)/inFlight) * latency
}

// inFlights lists the pairs' calls in flight, in the order first seen.
func inFlights(rows []slowRow) []int {
	var out []int
	for _, r := range rows {
		if w := r.pair.inFlight(); !r.pair.floor && !containsInt(out, w) {
			out = append(out, w)
		}
	}
	return out
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// slowGoals says, per case, whether tether meets the goals.
func slowGoals(name string, n int, latency time.Duration, rows []slowRow, limits func(int) (time.Duration, time.Duration)) string {
	var b strings.Builder
	find := func(upstream bool, defaults bool) *slowRow {
		for i := range rows {
			r := &rows[i]
			if r.failed == "" && !r.pair.floor && r.pair.upstream == upstream && (r.pair.qps == 0) == defaults {
				return r
			}
		}
		return nil
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	switch name {
	case "slow":
		for _, defaults := range []bool{true, false} {
			tr, ur := find(false, defaults), find(true, defaults)
			if tr == nil {
				continue
			}
			c, d := limits(tr.pair.inFlight())
			own := driverTime(n, tr.pair.inFlight(), latency).Seconds()
			fmt.Fprintf(&b, "%s: to all Bound %.2fx the limit (%.2fx the CSI time alone), to all deleted %.2fx (%.2fx)", tr.pair.label(),
				tr.bound.Seconds()/c.Seconds(), tr.bound.Seconds()/own, tr.deleted.Seconds()/d.Seconds(), tr.deleted.Seconds()/own)
			if !defaults {
				fmt.Fprintf(&b, " (goal at equal settings: within 1.1x of the limit: %s)", met(tr.bound.Seconds() <= 1.1*c.Seconds()))
			}
			if ur != nil {
				fmt.Fprintf(&b, "; %s takes %.2fx tether's time to all Bound (tether ahead: %s), %.2fx to all deleted (tether ahead: %s)",
					ur.pair.label(), ur.bound.Seconds()/tr.bound.Seconds(), met(tr.bound < ur.bound), ur.deleted.Seconds()/tr.deleted.Seconds(), met(tr.deleted < ur.deleted))
			}
			b.WriteString(".\n")
		}
	case "slower":
		for _, r := range rows {
			if r.failed != "" || r.pair.floor {
				continue
			}
			own := driverTime(n, r.pair.inFlight(), latency)
			c := r.creates
			fmt.Fprintf(&b, "%s: driver's own time %d / %d x %s = %s; all Bound in %.2fx of it (goal 1.2x: %s); volumes made once each: %s (%d claims made more than once); "+
				"never two calls at work for one claim: %s (%d claims had two or more); at most 2 calls per claim: %s (max %d)\n",
				r.pair.label(), n, r.pair.inFlight(), latency, sec(own), r.bound.Seconds()/own.Seconds(), met(r.bound.Seconds() <= 1.2*own.Seconds()),
				met(c.maxStarted == 1 && c.volumes == n), c.multiStarted, met(c.maxAtWork <= 1), c.multiAtWork, met(c.maxCalls <= 2), c.maxCalls)
		}
	}
	return b.String()
}

// writeSlowRow appends the run to _artifacts/bench/slowdriver.json.
func writeSlowRow(t *testing.T, name string, delay time.Duration, r slowRow) {
	settings := map[string]any{"case": name, "n": r.n, "latency_seconds": r.latency.Seconds(), "qps": r.pair.qps,
		"worker_threads": r.pair.inFlight(), "timeout_seconds": r.pair.timeout.Seconds(), "etcd_delay_seconds": delay.Seconds(),
		"upstream": r.pair.upstream, "floor": r.pair.floor}
	figures := map[string]any{}
	if r.failed != "" {
		figures["failed"] = r.failed
	} else {
		figures = map[string]any{
			"bound_seconds": r.bound.Seconds(), "bound_p50_seconds": r.boundP50.Seconds(), "bound_p99_seconds": r.boundP99.Seconds(),
			"bound_claims_per_second": float64(r.n) / r.bound.Seconds(),
			"deleted_seconds":         r.deleted.Seconds(), "deleted_p50_seconds": r.deletedP50.Seconds(), "deleted_p99_seconds": r.deletedP99.Seconds(),
			"binder_rss_bytes": r.binderRSS, "provisioner_rss_bytes": r.provRSS,
			"api_requests_per_claim_to_bound": r.createRequests, "api_requests_per_claim_to_deleted": r.deleteRequests, "cpu": r.cpu,
		}
		if !r.pair.floor {
			for prefix, f := range map[string]backendFigures{"create": r.creates, "delete": r.deletes} {
				figures[prefix+"_calls_per_volume"] = f.perVolume(f.calls)
				figures[prefix+"_calls_max"] = f.maxCalls
				figures[prefix+"_at_once_max"] = f.maxAtWork
				figures[prefix+"_volumes_at_once_2plus"] = f.multiAtWork
				figures[prefix+"_operations_max"] = f.maxStarted
				figures[prefix+"_volumes_operated_2plus"] = f.multiStarted
			}
			figures["backend_peak_calls"], figures["backend_volumes_left"] = r.peak, r.left
		}
	}
	if path, err := benchout.Write(benchout.Run{Bench: "slowdriver", Label: r.pair.label(), Started: r.started, Settings: settings, Figures: figures}); err != nil {
		t.Errorf("writing the figures: %v", err)
	} else {
		t.Logf("figures appended to %s", path)
	}
}

// TestRenderSlow: the limit, the ratios and the goals of each case, from
// made-up runs.
func TestRenderSlow(t *testing.T) {
	s := time.Second
	tether := slowPair{name: "tether", qps: 2000, workers: 100}
	upstream := slowPair{name: "upstream", qps: 2000, workers: 100, upstream: true}
	slow := renderSlow("slow", 1000, 2*s, 0, []slowRow{
		{pair: tether, n: 1000, bound: 22 * s, deleted: 30 * s},
		{pair: upstream, n: 1000, bound: 33 * s, deleted: 24 * s},
		{pair: slowPair{name: "floor", floor: true}, n: 1000, bound: 5 * s, deleted: 4 * s},
	})
	for _, want := range []string{
		"Limit at 100 calls in flight: 1000 / 100 (rounded up) x 2s = 20.00s; with the floor's API time added, 25.00s to all Bound (floor 5.00s), 24.00s to all deleted",
		"tether@qps2000@w100: to all Bound 0.88x the limit (1.10x the CSI time alone), to all deleted 1.25x (1.50x) (goal at equal settings: within 1.1x of the limit: met)",
		"upstream@qps2000@w100 takes 1.50x tether's time to all Bound (tether ahead: met), 0.80x to all deleted (tether ahead: NOT met)",
	} {
		if !strings.Contains(slow, want) {
			t.Errorf("case slow lacks %q:\n%s", want, slow)
		}
	}
	tether.timeout, upstream.timeout = slowerTimeout, slowerTimeout
	slower := renderSlow("slower", 200, 30*s, 0, []slowRow{
		{pair: tether, n: 200, bound: 70 * s, creates: backendFigures{volumes: 200, calls: 200, maxCalls: 1, started: 200, maxStarted: 1, maxAtWork: 1}},
		{pair: upstream, n: 200, bound: 80 * s, creates: backendFigures{volumes: 200, calls: 600, maxCalls: 3, started: 400, maxStarted: 2, multiStarted: 200, maxAtWork: 2, multiAtWork: 200}},
	})
	for _, want := range []string{
		"tether@qps2000@w100: driver's own time 200 / 100 x 30s = 60.00s; all Bound in 1.17x of it (goal 1.2x: met); volumes made once each: met (0 claims made more than once); never two calls at work for one claim: met (0 claims had two or more); at most 2 calls per claim: met (max 1)",
		"upstream@qps2000@w100: driver's own time 200 / 100 x 30s = 60.00s; all Bound in 1.33x of it (goal 1.2x: NOT met); volumes made once each: NOT met (200 claims made more than once); never two calls at work for one claim: NOT met (200 claims had two or more); at most 2 calls per claim: NOT met (max 3)",
		"upstream@qps2000@w100      3.00, 3       2 (200)     2 (200)",
	} {
		if !strings.Contains(slower, want) {
			t.Errorf("case slower lacks %q:\n%s", want, slower)
		}
	}
}
