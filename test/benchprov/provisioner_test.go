// Package benchprov measures dynamic provisioning end to end: tether's
// binder and provisioner against kube-controller-manager's binder and the
// upstream external-provisioner v6.4.0, on a local control plane.
// `make bench-provisioner` and `make bench-wffc`; the tests skip themselves
// unless TETHER_BENCH is set.
package benchprov

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/test/bench"
	"github.com/tether-csi/tether/test/cluster"

	"github.com/tether-csi/tether/test/benchkit"
)

const driverName = "mock.csi.tether.dev"

// pair is one binder + provisioner combination at one QPS setting, or the
// floor: no component, the pipeline's writes from a plain client
// (bench.ProvisionWrites).
type pair struct {
	name     string // "tether", "upstream" or "floor"
	qps      int    // 0: each component's default
	workers  int    // tether's binder's --workers; 0: its default
	upstream bool
	floor    bool
}

// TestBenchProvisioner: N claims of an Immediate class through the mock
// driver, for each pair: tether at its defaults, KCM+EP at theirs, and both
// with QPS raised to BENCH_QPS.
func TestBenchProvisioner(t *testing.T) {
	if !benchEnabled() {
		t.Skip("set TETHER_BENCH=1 to run the provisioner bench (make bench-provisioner)")
	}
	sizes := []int{1000}
	if v := os.Getenv("BENCH_N"); v != "" {
		var err error
		if sizes, err = bench.ParseSizes(v); err != nil {
			t.Fatalf("BENCH_N: %v", err)
		}
	}
	qps := benchkit.Int(t, "BENCH_QPS", 2000, false)
	pairs := []pair{{name: "tether"}, {name: "upstream", upstream: true}, {name: "tether", qps: qps}}
	// BENCH_TETHER_WORKERS=48,100 adds tether at BENCH_QPS with those
	// binder workers (labels tether@qps2000@w48, ...).
	for _, w := range strings.Split(os.Getenv("BENCH_TETHER_WORKERS"), ",") {
		if w = strings.TrimSpace(w); w != "" {
			n, err := strconv.Atoi(w)
			if err != nil || n < 1 {
				t.Fatalf("BENCH_TETHER_WORKERS: %q is not a positive integer", w)
			}
			pairs = append(pairs, pair{name: "tether", qps: qps, workers: n})
		}
	}
	pairs = append(pairs, pair{name: "upstream", qps: qps, upstream: true}, pair{name: "floor", floor: true})
	// One round: the upstream pair at its defaults alone takes four minutes.
	bySize := map[int][]row{}
	for _, n := range sizes {
		rows := runAll(t, "provisioner", pairs, 1, func(t *testing.T, p pair, label string, delay time.Duration) row {
			return runPair(t, p, n, label, delay)
		})
		bySize[n] = rows
		report := render(fmt.Sprintf("provisioner bench: %d claims (1Gi, Immediate, Delete) through the csi-test mock driver", n), rows)
		t.Log("\n" + report)
		fmt.Print(report)
	}
	if len(sizes) > 1 {
		small, large := slices.Min(sizes), slices.Max(sizes)
		report := renderScaling(small, large, bySize[small], bySize[large])
		t.Log("\n" + report)
		fmt.Print(report)
	}
}

func benchEnabled() bool { return os.Getenv("TETHER_BENCH") != "" }

func qpsLabel(q int) string {
	if q == 0 {
		return "defaults"
	}
	return "qps" + strconv.Itoa(q)
}

func runPair(t *testing.T, p pair, n int, label string, delay time.Duration) row {
	c := cluster.Start(t, cluster.Options{EtcdDelay: delay, APIServerArgs: map[string][]string{
		"max-requests-inflight": {"2000"}, "max-mutating-requests-inflight": {"1000"}}})
	bc := benchClients(t, c)
	var binder, prov *cluster.Process
	if !p.floor {
		binder, prov = startPair(t, c, p, bc)
	}
	mode := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Provisioner: driverName, VolumeBindingMode: &mode}
	if _, err := c.Client.StorageV1().StorageClasses().Create(t.Context(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return measure(t, c, bc, p, n, label, "bench", nil, binder, prov)
}

// floorConns is how many claims the floor writes for at a time: with 64,
// on a loaded machine, the floor was bound by its own sequential writes.
const floorConns = 256

// floorWrites makes, for the floor, the pipeline's writes for claim i just
// created: with events for four claims in five (tether's pair records
// about 0.8 per claim, client-go's event rate limit drops the rest).
// Its writes go out in the names of a binder and a provisioner
// (bench.FloorClient), as the pipeline's do.
func floorWrites(config *rest.Config) func(context.Context, int, *corev1.PersistentVolumeClaim) error {
	cs := bench.ProvisionClients{Binder: bench.FloorClient(config, "binder"), Provisioner: bench.FloorClient(config, "provisioner")}
	return func(ctx context.Context, i int, pvc *corev1.PersistentVolumeClaim) error {
		return bench.ProvisionWrites(ctx, cs, pvc, driverName, i%5 != 4)
	}
}

// clients is how every component of a bench, and the bench itself, reach
// the API server: as a ServiceAccount with a token, the way components in
// a cluster do (see cluster.AdminTokenKubeconfig).
type clients struct {
	kubeconfig string
	config     *rest.Config
}

func benchClients(t *testing.T, c *cluster.Cluster) clients {
	kc, cfg := c.AdminTokenKubeconfig(t)
	return clients{kubeconfig: kc, config: cfg}
}

// cpuPIDs names the processes whose CPU time the bench reports: this
// run's control plane, components and the bench itself.
func cpuPIDs(p pair, apiPID, etcdPID int, binder, prov *cluster.Process) map[string]int {
	pids := map[string]int{"kube-apiserver": apiPID, "etcd": etcdPID, "bench": os.Getpid()}
	if binder != nil && prov != nil {
		if p.upstream {
			pids["kube-controller-manager"], pids["external-provisioner"] = binder.Pid(), prov.Pid()
		} else {
			pids["binder"], pids["provisioner"] = binder.Pid(), prov.Pid()
		}
	}
	return pids
}

// measure creates the claims (and pods), waits for them, and makes the row.
func measure(t *testing.T, c *cluster.Cluster, bc clients, p pair, n int, label, class string, podOf func(int) *corev1.Pod, binder, prov *cluster.Process) row {
	before := apiRequests(t, c)
	profLabel := fmt.Sprintf("%s.%d", label, n) // a round's profiles apart from the next size's
	stopHeap := peakHeapProfile(t, profLabel, prov)
	stopProfile := profileAPIServer(t, c, profLabel)
	apiPID, etcdPID := c.ControlPlanePIDs()
	pids := cpuPIDs(p, apiPID, etcdPID, binder, prov)
	cpuBefore := benchkit.ReadCPU(pids)
	var after func(context.Context, int, *corev1.PersistentVolumeClaim) error
	if p.floor {
		after = floorWrites(bc.config)
	}
	lat, total, err := createAndWait(t, bc.config, n, func(i int) *corev1.PersistentVolumeClaim { return claim(i, class) }, podOf, after)
	r := row{label: label, n: n, total: total, upstream: p.upstream, floor: p.floor, qps: p.qps}
	r.apiRSS, r.etcdRSS = benchkit.ReadMem(apiPID).HWM, benchkit.ReadMem(etcdPID).HWM
	r.cpu = benchkit.CPUUse(cpuBefore, benchkit.ReadCPU(pids), n)
	stopProfile()
	stopHeap()
	requestsAfter := apiRequests(t, c)
	r.requests = bench.RequestsPerClaim(before, requestsAfter, n) + eventsByReason(t, c, n)
	r.apiRequests = bench.PerClaim(before, requestsAfter, n)
	if err != nil {
		r.failed = err.Error()
		t.Error(err)
		return r
	}
	r.p50, r.p99 = benchkit.Percentile(lat, 50), benchkit.Percentile(lat, 99)
	r.binderRSS, r.provRSS = peakRSS(binder), peakRSS(prov)
	logListsAndWatches(t, c, label)
	return r
}

// logListsAndWatches logs each client's lists and watches of claims and PVs
// over the run: a watch started again where one would do is one the API
// server closed (too slow, or its time was up), a list after the first
// one a watch that could not resume.
func logListsAndWatches(t *testing.T, c *cluster.Cluster, label string) {
	counts, err := c.StorageListsAndWatches()
	if err != nil {
		t.Logf("%s: lists and watches: %v", label, err)
		return
	}
	keys := slices.Sorted(maps.Keys(counts))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	t.Logf("%s: lists and watches of claims and PVs, by client: %s", label, strings.Join(parts, "; "))
}

// startPair starts a binder and a provisioner (and the mock driver).
func startPair(t *testing.T, c *cluster.Cluster, p pair, bc clients, mockArgs ...string) (binder, prov *cluster.Process) {
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
	c.Run(t, cluster.ProcessOptions{Name: "mock", Path: mock, Args: append([]string{"-name=" + driverName, "-v=1"}, mockArgs...),
		Env: []string{"CSI_ENDPOINT=unix://" + socket}})
	var qpsArgs []string
	if p.qps > 0 {
		qpsArgs = []string{fmt.Sprintf("--kube-api-qps=%d", p.qps), fmt.Sprintf("--kube-api-burst=%d", 2*p.qps)}
	}
	if p.upstream {
		// The later --kubeconfig wins over the cluster's own.
		binder = c.StartControllerManager(t, []string{"persistentvolume-binder-controller"}, append(qpsArgs, "--kubeconfig="+bc.kubeconfig)...)
		ep, err := cluster.Tool("csi-provisioner")
		if err != nil {
			t.Fatal(err)
		}
		prov = c.Run(t, cluster.ProcessOptions{Name: "external-provisioner", Path: ep, Args: append([]string{
			"--kubeconfig=" + bc.kubeconfig, "--csi-address=" + socket, "--leader-election=false", "-v=1"}, qpsArgs...)})
		return binder, prov
	}
	binderArgs := []string{"--kubeconfig=" + bc.kubeconfig, "--leader-elect=false", "-v=1"}
	if p.workers > 0 {
		binderArgs = append(binderArgs, fmt.Sprintf("--workers=%d", p.workers))
	}
	provArgs := []string{"--kubeconfig=" + bc.kubeconfig, "--csi-address=" + socket, "--leader-election=false", "-v=1"}
	if os.Getenv("BENCH_PPROF") != "" {
		profiled["binder"], profiled["provisioner"] = cluster.FreeAddr(t), cluster.FreeAddr(t)
		binderArgs = append(binderArgs, "--enable-pprof", "--http-endpoint="+profiled["binder"])
		provArgs = append(provArgs, "--enable-pprof", "--http-endpoint="+profiled["provisioner"])
	}
	binder = c.Run(t, cluster.ProcessOptions{Name: "binder", Path: cluster.BuildBinary(t, "./cmd/binder"), Args: append(binderArgs, qpsArgs...)})
	prov = c.Run(t, cluster.ProcessOptions{Name: "provisioner", Path: cluster.BuildBinary(t, "./cmd/provisioner"), Args: append(provArgs, qpsArgs...)})
	return binder, prov
}

func claim(i int, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%05d", i), Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
}

// createAndWait creates n claims (and, with podOf, a pod for each) as fast
// as the API server takes them, and waits until a watch has seen all of
// them Bound. Latencies run from each claim's creation to its Bound. after,
// if set, runs for each claim once it is created, on a goroutine of its
// own (floorConns at a time).
func createAndWait(t *testing.T, config *rest.Config, n int, claimOf func(int) *corev1.PersistentVolumeClaim,
	podOf func(int) *corev1.Pod, after func(context.Context, int, *corev1.PersistentVolumeClaim) error) ([]time.Duration, time.Duration, error) {
	ctx := t.Context()
	fast := rest.CopyConfig(config)
	fast.QPS, fast.Burst = 20000, 40000
	admin := kubernetes.NewForConfigOrDie(fast)
	var mu sync.Mutex
	created, bound := map[string]time.Time{}, map[string]time.Time{}
	factory := informers.NewSharedInformerFactory(admin, 0)
	inf := factory.Core().V1().PersistentVolumeClaims().Informer()
	// visible[name] closes when the watch has seen the claim: a pod is
	// created only then, as a StatefulSet's would be, so that the scheduler
	// does not meet a pod before its claim (it would set the pod aside
	// with a backoff that has nothing to do with what is measured).
	visible := make([]chan struct{}, n)
	for i := range visible {
		visible[i] = make(chan struct{})
	}
	index := map[string]int{}
	for i := range n {
		index[claimOf(i).Name] = i
	}
	seen := func(obj any) {
		if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && pvc.Status.Phase == corev1.ClaimBound {
			mu.Lock()
			if _, ok := bound[pvc.Name]; !ok {
				bound[pvc.Name] = time.Now()
			}
			mu.Unlock()
		}
	}
	added := func(obj any) {
		if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
			if i, ok := index[pvc.Name]; ok {
				close(visible[i])
			}
		}
		seen(obj)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: added, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
		return nil, 0, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	factory.Start(watchCtx.Done())
	defer factory.Shutdown() // after stopWatch: Shutdown waits for the informer to stop
	defer stopWatch()
	cache.WaitForCacheSync(watchCtx.Done(), inf.HasSynced)

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	sem := make(chan struct{}, 64)
	afterSem := make(chan struct{}, floorConns)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			pvc := claimOf(i)
			mu.Lock()
			created[pvc.Name] = time.Now()
			mu.Unlock()
			out, err := admin.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{})
			if err != nil {
				errs <- err
				return
			}
			if after != nil {
				// On their own goroutines, floorConns at a time: the
				// creations keep their pace, as with a real pipeline.
				wg.Add(1)
				afterSem <- struct{}{}
				go func() {
					defer func() { <-afterSem; wg.Done() }()
					if err := after(ctx, i, out); err != nil {
						errs <- err
					}
				}()
			}
			if podOf != nil {
				select {
				case <-visible[i]:
				case <-ctx.Done():
					return
				}
				if _, err := admin.CoreV1().Pods("default").Create(ctx, podOf(i), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return nil, 0, err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(bound) == n, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		return nil, time.Since(start), fmt.Errorf("%d of %d claims bound: %w", len(bound), n, err)
	}
	var lat []time.Duration
	last := start
	for name, at := range bound {
		lat = append(lat, at.Sub(created[name]))
		if at.After(last) {
			last = at
		}
	}
	return lat, last.Sub(start), nil
}

// profileAPIServer, with BENCH_PPROF set to a folder, records CPU profiles
// of the API server and of the running pair's components from now for
// profileSeconds, into <folder>/<label>.<name>.pprof (the label with the
// round's claim count); the returned func waits for them.
func profileAPIServer(t *testing.T, c *cluster.Cluster, label string) func() {
	dir := os.Getenv("BENCH_PPROF")
	if dir == "" {
		return func() {}
	}
	wait := c.CPUProfiles(t, dir, label, profileSeconds, maps.Clone(profiled))
	clear(profiled)
	return wait
}

// peakHeapProfile, with BENCH_PPROF, keeps the heap profile of tether's
// provisioner nearest its peak RSS over the run, in
// <folder>/<label>.provisioner.peak.heap.pprof (the label with the
// round's claim count): what its bytes per claim
// are made of.
func peakHeapProfile(t *testing.T, label string, prov *cluster.Process) (stop func()) {
	dir, addr := os.Getenv("BENCH_PPROF"), profiled["provisioner"]
	if dir == "" || addr == "" || prov == nil {
		return func() {}
	}
	done := benchkit.PeakHeapProfile(filepath.Join(dir, label+".provisioner.peak.heap.pprof"), addr, prov.Pid(), 2*time.Second)
	return func() {
		if err := done(); err != nil {
			t.Logf("heap profile of the provisioner: %v", err)
		}
	}
}

// profileSeconds is how long BENCH_PPROF profiles: at least one run.
const profileSeconds = 15

// profiled holds the pprof addresses of the components of the running pair.
var profiled = map[string]string{}

// eventsByReason counts the events in the bench's namespace per claim, by
// reason (the count of an aggregated event included).
func eventsByReason(t *testing.T, c *cluster.Cluster, n int) string {
	events, err := c.Client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return ""
	}
	counts := map[string]int{}
	for _, e := range events.Items {
		counts[e.Reason] += max(int(e.Count), 1)
	}
	var parts []string
	for reason, count := range counts {
		parts = append(parts, fmt.Sprintf("%s %.2f", reason, float64(count)/float64(n)))
	}
	slices.Sort(parts)
	return "; events per claim: " + strings.Join(parts, ", ")
}

// apiRequests reads the API server's request counters.
func apiRequests(t *testing.T, c *cluster.Cluster) map[string]float64 {
	raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Logf("reading the API server's metrics: %v", err)
		return nil
	}
	return bench.APIRequests(string(raw))
}

func peakRSS(p *cluster.Process) int64 {
	if p == nil {
		return 0
	}
	return benchkit.ReadMem(p.Pid()).HWM
}
