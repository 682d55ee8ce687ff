package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/tether-csi/tether/pkg/server"
	"github.com/tether-csi/tether/test/cluster"

	"github.com/tether-csi/tether/test/benchkit"
)

// Knobs:
//
//	TETHER_BENCH=1     run the bench (otherwise the test skips itself)
//	BENCH_N            sizes, comma-separated (default 1000,10000)
//	BENCH_QPS          the binders' --kube-api-qps (default 2000; burst twice that)
//	BENCH_KCM_MAX_N    skip KCM above this size (default 10000)
//	BENCH_WORKERS      our binder's --workers (default: its own default)
//	BENCH_TIMEOUT      the longest wait for one run to bind everything (default 30m)
//	BENCH_BINDERS      which binders, in order (default tether,kcm,floor; the
//	                   floor is no binder, see floor.go; floor+watch is the
//	                   floor with a binder's informers; tether@w48 is tether
//	                   with 48 workers)
//	BENCH_ETCD_DELAY   etcd delays each way, comma-separated: each is a mode
//	                   that runs everything (default 0,2.5ms; see
//	                   cluster.Options.EtcdDelay)
//	BENCH_RUNS         rounds of each binder at each size (default 1); the
//	                   table shows the median round
//	BENCH_PPROF        a folder: CPU profiles of the API server and of
//	                   tether's binder from the start of each round, for
//	                   BENCH_PPROF_SECONDS (default 5: within a round of 1000)
type benchConfig struct {
	binders []string
	sizes   []int
	delays  []time.Duration
	runs    int
	// pprofSeconds is how long BENCH_PPROF profiles each round.
	pprofSeconds int
	qps, burst   int
	kcmMaxN      int
	workers      string
	timeout      time.Duration
}

const (
	namespace   = "bench"
	className   = "bench"
	createConns = 64 // goroutines that create objects
)

func loadConfig(t *testing.T) benchConfig {
	t.Helper()
	env := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	atoi := func(name, def string) int {
		n, err := strconv.Atoi(env(name, def))
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive integer", name, env(name, def))
		}
		return n
	}
	sizes, err := ParseSizes(env("BENCH_N", "1000,10000"))
	if err != nil {
		t.Fatalf("BENCH_N: %v", err)
	}
	timeout, err := time.ParseDuration(env("BENCH_TIMEOUT", "30m"))
	if err != nil {
		t.Fatalf("BENCH_TIMEOUT: %v", err)
	}
	qps := atoi("BENCH_QPS", "2000")
	binders := strings.Split(env("BENCH_BINDERS", "tether,kcm,floor"), ",")
	for _, b := range binders {
		if _, tether := TetherWorkers(b); !tether && b != "kcm" && b != "floor" && b != WatchingFloor {
			t.Fatalf("BENCH_BINDERS: unknown binder %q (want tether, tether@w<workers>, kcm, floor or %s)", b, WatchingFloor)
		}
	}
	delays, err := ParseDelays(env("BENCH_ETCD_DELAY", DefaultDelays))
	if err != nil {
		t.Fatalf("BENCH_ETCD_DELAY: %v", err)
	}
	return benchConfig{
		binders:      binders,
		sizes:        sizes,
		delays:       delays,
		runs:         atoi("BENCH_RUNS", "1"),
		qps:          qps,
		burst:        2 * qps,
		kcmMaxN:      atoi("BENCH_KCM_MAX_N", "10000"),
		workers:      os.Getenv("BENCH_WORKERS"),
		pprofSeconds: atoi("BENCH_PPROF_SECONDS", "5"),
		timeout:      timeout,
	}
}

// TestBenchBinder runs, for each size, our binder and then KCM's, each on its
// own fresh control plane, and prints a table.
func TestBenchBinder(t *testing.T) {
	if os.Getenv("TETHER_BENCH") == "" {
		t.Skip("set TETHER_BENCH=1 to run the binder bench (make bench-binder)")
	}
	cfg := loadConfig(t)
	var results []Result
	for _, delay := range cfg.delays {
		for _, n := range cfg.sizes {
			for round := 1; round <= cfg.runs; round++ {
				for _, binder := range cfg.binders {
					if binder == "kcm" && n > cfg.kcmMaxN {
						if round == 1 {
							results = append(results, Result{N: n, Binder: binder, Delay: delay, Skipped: fmt.Sprintf("N > BENCH_KCM_MAX_N=%d", cfg.kcmMaxN)})
						}
						continue
					}
					r := Result{N: n, Binder: binder, Delay: delay, Skipped: "failed, see the log above"}
					name := fmt.Sprintf("%s-%d-delay%s", binder, n, delay)
					if cfg.runs > 1 {
						name += fmt.Sprintf("#%d", round)
					}
					t.Run(name, func(t *testing.T) {
						r = runOnce(t, cfg, binder, n, delay)
					})
					results = append(results, r)
					writeResult(t, cfg, r, round)
				}
			}
		}
	}
	table := Table(results, cfg.qps, cfg.burst)
	t.Log("\n" + table)
	fmt.Print(table)
}

func runOnce(t *testing.T, cfg benchConfig, binder string, n int, delay time.Duration) Result {
	c := cluster.Start(t, cluster.Options{EtcdDelay: delay, APIServerArgs: map[string][]string{
		"max-requests-inflight":          {"2000"},
		"max-mutating-requests-inflight": {"1000"},
	}})
	ctx := t.Context()
	// A ServiceAccount token, as components in a cluster use (see
	// cluster.AdminTokenKubeconfig), for the binders and the bench alike.
	kubeconfig, config := c.AdminTokenKubeconfig(t)
	fast := rest.CopyConfig(config)
	fast.QPS, fast.Burst = 20000, 40000
	admin := kubernetes.NewForConfigOrDie(fast)
	apiPID, etcdPID := c.ControlPlanePIDs()

	setupStart := time.Now()
	if err := populate(ctx, admin, n); err != nil {
		t.Fatalf("create %d volumes and claims: %v", n, err)
	}
	t.Logf("%s N=%d: created %d volumes (set Available) and %d claims in %s",
		binder, n, n, n, time.Since(setupStart).Round(time.Millisecond))

	// Watch claims before the binder starts.
	var (
		mu      sync.Mutex
		boundAt = make(map[string]time.Time, n)
	)
	record := func(obj any) {
		pvc, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok || pvc.Status.Phase != corev1.ClaimBound {
			return
		}
		now := time.Now()
		mu.Lock()
		if _, seen := boundAt[pvc.Name]; !seen {
			boundAt[pvc.Name] = now
		}
		mu.Unlock()
	}
	bound := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(boundAt)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	factory := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithNamespace(namespace))
	informer := factory.Core().V1().PersistentVolumeClaims().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(watchCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("claim informer did not sync")
	}
	if got := bound(); got != 0 {
		t.Fatalf("%d claims Bound before any binder runs", got)
	}

	pprofAddrs := map[string]string{}
	if _, tether := TetherWorkers(binder); tether {
		cluster.BuildBinary(t, "./cmd/binder") // compile before the clock starts
		if os.Getenv("BENCH_PPROF") != "" {
			pprofAddrs["binder"] = cluster.FreeAddr(t)
		}
	}
	requestsBefore := apiRequests(t, c)
	pids := map[string]int{"kube-apiserver": apiPID, "etcd": etcdPID, "bench": os.Getpid()}
	cpuBefore := benchkit.ReadCPU(pids)
	start := time.Now()
	var proc *cluster.Process
	floorDone := make(chan error, 1)
	switch binder {
	case "floor":
		go func() { floorDone <- bindFloor(ctx, FloorClient(config, "binder"), n) }()
	case WatchingFloor:
		go func() { floorDone <- bindWatchingFloor(ctx, config, n) }()
	default:
		proc = startBinder(t, c, cfg, binder, kubeconfig, pprofAddrs)
		pids[binder] = proc.Pid()
		cpuBefore.ByProgram[binder] = 0 // it started with the clock
	}
	waitProfiles := func() {}
	if dir := os.Getenv("BENCH_PPROF"); dir != "" {
		waitProfiles = c.CPUProfiles(t, dir, fmt.Sprintf("%s-%d-delay%s", binder, n, delay), cfg.pprofSeconds, pprofAddrs)
	}
	var peak atomic.Int64
	sampleRSS := func() {
		if proc == nil {
			return
		}
		if v := benchkit.ReadMem(proc.Pid()).HWM; v > peak.Load() {
			peak.Store(v)
		}
	}
	rssDone := make(chan struct{})
	go func() {
		// VmHWM is the kernel's own high-water mark; sampling it only
		// guards against reading it after the process is gone.
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-rssDone:
				return
			case <-tick.C:
				sampleRSS()
			}
		}
	}()

	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, cfg.timeout, true, func(context.Context) (bool, error) {
		if proc != nil && !proc.Running() {
			return false, errors.New("the binder exited")
		}
		select {
		case err := <-floorDone:
			if err != nil {
				return false, err
			}
		default:
		}
		return bound() == n, nil
	})
	sampleRSS()
	close(rssDone)
	waitProfiles()
	saveHeapProfile(t, os.Getenv("BENCH_PPROF"), fmt.Sprintf("%s-%d-delay%s", binder, n, delay), "binder", pprofAddrs["binder"])
	if err != nil {
		logs := ""
		if proc != nil {
			logs = fmt.Sprintf("\n--- last lines of %s ---\n%s", proc.LogPath, cluster.Tail(proc.LogPath, 30))
		}
		t.Fatalf("%s N=%d: %d of %d claims Bound after %s: %v%s", binder, n, bound(), n,
			time.Since(start).Round(time.Second), err, logs)
	}
	cpu := benchkit.CPUUse(cpuBefore, benchkit.ReadCPU(pids), n)
	requestsAfter := apiRequests(t, c)
	requests := RequestsPerClaim(requestsBefore, requestsAfter, n) + "\n    " + cpu
	if err := checkVolumes(ctx, admin, n); err != nil {
		t.Errorf("%s N=%d: %v", binder, n, err)
	}

	mu.Lock()
	latencies := make([]time.Duration, 0, n)
	for _, at := range boundAt {
		latencies = append(latencies, at.Sub(start))
	}
	mu.Unlock()
	r := Result{
		N: n, Binder: binder,
		First: benchkit.Percentile(latencies, 0), Total: benchkit.Percentile(latencies, 100),
		P50: benchkit.Percentile(latencies, 50), P99: benchkit.Percentile(latencies, 99),
		PeakRSS: peak.Load(), Delay: delay, Requests: requests,
		Started: start, APIRequests: PerClaim(requestsBefore, requestsAfter, n), CPU: cpu,
	}
	r.APIServerRSS = benchkit.ReadMem(apiPID).HWM
	r.EtcdRSS = benchkit.ReadMem(etcdPID).HWM
	t.Logf("%s N=%d etcd delay %s: all Bound in %s (%.1f claims/s), p50 %s, p99 %s, peak RSS %s (kube-apiserver %s, etcd %s); %s",
		binder, n, delay, seconds(r.Total), r.ClaimsPerSecond(), seconds(r.P50), seconds(r.P99), mib(r.PeakRSS),
		mib(r.APIServerRSS), mib(r.EtcdRSS), requests)
	return r
}

// bindWatchingFloor runs informers on volumes and claims, as a binder's,
// on a client of their own (the binder's QPS), and makes the floor's
// writes once they have synced; they run until ctx ends.
func bindWatchingFloor(ctx context.Context, config *rest.Config, n int) error {
	watchConfig := rest.CopyConfig(config)
	watchConfig.ContentType = "application/vnd.kubernetes.protobuf"
	watchConfig.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	factory := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(watchConfig), 0,
		informers.WithTransform(server.DropManagedFields)) // as the binder's informers
	volumes := factory.Core().V1().PersistentVolumes().Informer()
	claims := factory.Core().V1().PersistentVolumeClaims().Informer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), volumes.HasSynced, claims.HasSynced) {
		return errors.New("the floor's informers did not sync")
	}
	return bindFloor(ctx, FloorClient(config, "binder"), n)
}

// bindFloor lists the volumes and claims, as a binder's informers do, and
// binds pv-i to claim-i with BindWrites, FloorConns pairs at a time.
func bindFloor(ctx context.Context, cs kubernetes.Interface, n int) error {
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	claims, err := cs.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(pvs.Items) != n || len(claims.Items) != n {
		return fmt.Errorf("listed %d volumes and %d claims, want %d of each", len(pvs.Items), len(claims.Items), n)
	}
	slices.SortFunc(pvs.Items, func(a, b corev1.PersistentVolume) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(claims.Items, func(a, b corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
	return parallelN(ctx, FloorConns, n, func(i int) error { return BindWrites(ctx, cs, &pvs.Items[i], &claims.Items[i]) })
}

// apiRequests reads the API server's request counters.
func apiRequests(t *testing.T, c *cluster.Cluster) map[string]float64 {
	raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Logf("reading the API server's metrics: %v", err)
		return nil
	}
	return APIRequests(string(raw))
}

func startBinder(t *testing.T, c *cluster.Cluster, cfg benchConfig, binder, kubeconfig string, pprofAddrs map[string]string) *cluster.Process {
	qps := fmt.Sprintf("--kube-api-qps=%d", cfg.qps)
	burst := fmt.Sprintf("--kube-api-burst=%d", cfg.burst)
	if binder == "kcm" {
		// KCM keeps its default --pvclaimbinder-sync-period (15s).
		// The later --kubeconfig wins over the cluster's own.
		return c.StartControllerManager(t, []string{"persistentvolume-binder-controller"}, qps, burst, "--kubeconfig="+kubeconfig)
	}
	args := []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", qps, burst, "-v=2"}
	if workers, _ := TetherWorkers(binder); workers != "" {
		args = append(args, "--workers="+workers)
	} else if cfg.workers != "" {
		args = append(args, "--workers="+cfg.workers)
	}
	if addr := pprofAddrs["binder"]; addr != "" {
		args = append(args, "--enable-pprof", "--http-endpoint="+addr)
	}
	return c.Run(t, cluster.ProcessOptions{Name: "binder", Path: cluster.BuildBinary(t, "./cmd/binder"), Args: args})
}

// populate creates the class, the namespace, n Available volumes and n
// claims, with many connections at once. The volumes are set Available as a
// volume that has existed for a while is: the bench times binding, not a
// binder's first pass over new volumes.
func populate(ctx context.Context, cs kubernetes.Interface, n int) error {
	mode := storagev1.VolumeBindingImmediate
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: className},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &mode,
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	size := resource.MustParse("1Gi")
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	err := parallel(ctx, n, func(i int) error {
		name := fmt.Sprintf("pv-%05d", i)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:              className,
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
				AccessModes:                   modes,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/tether-bench/" + name},
				},
			},
		}
		created, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status.Phase = corev1.VolumeAvailable
		_, err = cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	claimClass := className
	return parallel(ctx, n, func(i int) error {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%05d", i), Namespace: namespace},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: &claimClass,
				AccessModes:      modes,
				Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: size},
				},
			},
		}
		_, err := cs.CoreV1().PersistentVolumeClaims(namespace).Create(ctx, claim, metav1.CreateOptions{})
		return err
	})
}

// parallel runs fn(0..n-1) on createConns goroutines and returns the first
// error.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	return parallelN(ctx, createConns, n, fn)
}

// parallelN runs fn(0..n-1) on conns goroutines and returns the first
// error (AlreadyExists is not one).
func parallelN(ctx context.Context, conns, n int, fn func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(conns, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil && !apierrors.IsAlreadyExists(err) {
					cancel(err)
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// checkVolumes verifies that every volume is Bound to a distinct claim.
func checkVolumes(ctx context.Context, cs kubernetes.Interface, n int) error {
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	claims := map[string]bool{}
	for _, pv := range pvs.Items {
		if pv.Spec.ClaimRef == nil || pv.Status.Phase != corev1.VolumeBound {
			continue
		}
		if claims[pv.Spec.ClaimRef.Name] {
			return fmt.Errorf("claim %s holds two volumes", pv.Spec.ClaimRef.Name)
		}
		claims[pv.Spec.ClaimRef.Name] = true
	}
	if len(claims) != n {
		return fmt.Errorf("%d of %d volumes are Bound to a claim", len(claims), n)
	}
	return nil
}
