package benchnodes

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/test/bench"
	"github.com/tether-csi/tether/test/benchkit"
	"github.com/tether-csi/tether/test/cluster"
)

// syncedMarker is what both provisioners log once their caches are
// synced: sig-storage-lib-external-provisioner's controller, after its
// own WaitForCacheSync, which comes after the program's (tether's
// "Provisioner started" and EP's factory.WaitForCacheSync).
const syncedMarker = "Started provisioner controller"

func numCPU() int { return runtime.NumCPU() }

// apiMetrics is the API server's /metrics text.
func (e *env) apiMetrics(t *testing.T) string {
	raw, err := e.c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Logf("reading the API server's metrics: %v", err)
		return ""
	}
	return string(raw)
}

// watches is the number of WATCH requests of a resource the API server
// holds open (apiserver_longrunning_requests; apiserver_registered_watchers
// is gone from recent versions).
func watches(metrics, resource string) float64 {
	return benchkit.MetricSum(metrics, "apiserver_longrunning_requests", map[string]string{"verb": "WATCH", "resource": resource})
}

// sent is what the API server sent to watchers of resource since before.
func sent(before, after, resource string) watchLoad {
	m := map[string]string{"resource": resource}
	return watchLoad{
		events: benchkit.MetricSum(after, "apiserver_watch_events_total", m) - benchkit.MetricSum(before, "apiserver_watch_events_total", m),
		bytes:  benchkit.MetricSum(after, "apiserver_watch_events_sizes_sum", m) - benchkit.MetricSum(before, "apiserver_watch_events_sizes_sum", m),
	}
}

// prov is one node's pod: its driver and its provisioner.
type prov struct {
	node      string
	socket    string
	metrics   string // the provisioner's --http-endpoint
	driver    *cluster.Process
	proc      *cluster.Process
	started   time.Time
	syncedAt  time.Time
	logOffset int64
	// caughtUpAt is when its listings behind the watch had caught up
	// (waitCaughtUp); zero for one that lists whole.
	caughtUpAt time.Time
}

// runStack runs one stack on the cluster and measures it.
func runStack(t *testing.T, e *env, label string) row {
	s := e.s
	r := row{label: label, wanted: s.nodes, owned: s.n / s.clusterNodes}
	path := provisionerPath(t, e, label)

	pods := startDrivers(t, e, label)
	before := e.apiMetrics(t)

	start := func(p *prov) { startProvisioner(t, e, label, path, p) }
	stopAll := func() { stopPods(pods) }
	defer stopAll()

	// The first alone: its peak memory says how many fit (the others
	// start together, as a DaemonSet's pods do).
	start(pods[0])
	if err := waitSynced(t.Context(), pods[:1], s.timeout); err != nil {
		r.failed = err.Error()
		t.Error(r.failed)
		return r
	}
	first := benchkit.ReadMem(pods[0].proc.Pid()).HWM
	running := s.nodes
	if avail := benchkit.MemAvailable(); first > 0 && avail > 0 {
		fit := 1 + int((avail-int64(s.reserveMiB)<<20)/(first+first/4))
		if fit < s.nodes {
			running = max(1, fit)
			r.limited = fmt.Sprintf("memory: the first peaked at %s with %s available; %d fit with %d MiB kept free",
				mib(first), mib(avail), running, s.reserveMiB)
			t.Log(r.limited)
		}
	}
	pods, idle := pods[:running], pods[running:]
	for _, p := range idle {
		p.driver.Stop(10 * time.Second)
	}
	for _, p := range pods[1:] {
		start(p)
	}
	r.nodes = running
	err := waitSynced(t.Context(), pods, s.timeout)
	for _, p := range pods {
		if !p.syncedAt.IsZero() {
			r.synced = append(r.synced, p.syncedAt.Sub(p.started))
		}
	}
	if err != nil {
		// What the synced ones hold, and the others' VmRSS so far, in
		// the log: the row says the stack stopped.
		r.failed = err.Error()
		for _, p := range pods {
			m := benchkit.ReadMem(p.proc.Pid())
			t.Logf("%s: %s synced=%t after %s: VmRSS %s, VmHWM %s", label, p.node, !p.syncedAt.IsZero(),
				time.Since(p.started).Round(time.Second), mib(m.RSS), mib(m.HWM))
			if !p.syncedAt.IsZero() {
				r.afterSync = append(r.afterSync, m)
			}
		}
		t.Error(r.failed)
		return r
	}
	t.Logf("%s: %d provisioners synced, the last %s after its start", label, running, benchkit.Percentile(r.synced, 100))

	// Settled: what each holds at rest.
	hold(t, 5*time.Second)
	afterSync := e.apiMetrics(t)
	r.watchersPVC = watches(afterSync, "persistentvolumeclaims") - watches(before, "persistentvolumeclaims")
	r.watchersPV = watches(afterSync, "persistentvolumes") - watches(before, "persistentvolumes")
	r.apiRSSSync = benchkit.ReadMem(e.apiPID).RSS
	for _, p := range pods {
		r.afterSync = append(r.afterSync, benchkit.ReadMem(p.proc.Pid()))
		if h, ok := heapInUse(p.metrics); ok {
			r.heapSync = append(r.heapSync, h)
		}
	}

	// New claims on every running node.
	if s.fresh > 0 {
		r.newClaims, r.toPV, r.toGone, r.newFailed = newClaims(t, e, label, pods, s.fresh)
		t.Logf("%s: %d new claims, %d failed; to PV p50 %s p99 %s", label, r.newClaims, r.newFailed,
			benchkit.Percentile(r.toPV, 50), benchkit.Percentile(r.toPV, 99))
	}
	hold(t, 2*time.Second)
	for _, p := range pods {
		r.afterNew = append(r.afterNew, benchkit.ReadMem(p.proc.Pid()))
		if h, ok := heapInUse(p.metrics); ok {
			r.heapNew = append(r.heapNew, h)
		}
	}

	// The churn: label updates spread over every node's claims.
	if s.churn > 0 {
		pids := map[string]int{}
		for _, p := range pods {
			pids[p.node] = p.proc.Pid()
		}
		m0, cpu0 := e.apiMetrics(t), benchkit.ReadCPU(pids)
		onRunning, err := churn(t.Context(), e, label, running)
		if err != nil {
			t.Errorf("%s: churn: %v", label, err)
		}
		m1 := settleWatchEvents(t, e, "persistentvolumeclaims")
		cpu1 := benchkit.ReadCPU(pids)
		r.churn, r.churnOnRunning = s.churn, onRunning
		r.churnPVC, r.churnPV = sent(m0, m1, "persistentvolumeclaims"), sent(m0, m1, "persistentvolumes")
		for name, ticks := range cpu1.ByProgram {
			r.churnCPU += float64(ticks-cpu0.ByProgram[name]) / 100
		}
	}
	for _, p := range pods {
		if !p.proc.Running() {
			t.Errorf("%s: the provisioner of %s exited (log %s)", label, p.node, p.proc.LogPath)
		}
	}
	api := benchkit.ReadMem(e.apiPID)
	r.apiRSS, r.apiHWM = api.RSS, api.HWM
	stopAll()
	r.errorKinds = map[string]int{}
	for _, p := range pods {
		kinds, size := errorLines(p.proc.LogPath)
		r.logBytes += size
		for k, n := range kinds {
			r.errorKinds[k] += n
			r.errorLines += n
		}
	}
	if r.errorLines > 0 {
		t.Logf("%s: %d error lines in the provisioners' logs (%s of logs in all), by kind:\n%s", label, r.errorLines,
			mib(r.logBytes), kindsText(r.errorKinds))
	}
	return r
}

// stopPods stops every provisioner and driver, all at once.
func stopPods(pods []*prov) {
	var wg sync.WaitGroup
	for _, p := range pods {
		if p.proc != nil {
			wg.Go(func() { p.proc.Stop(10 * time.Second) })
		}
		wg.Go(func() { p.driver.Stop(10 * time.Second) })
	}
	wg.Wait()
}

// wffcClaim is a new claim of the bench's WaitForFirstConsumer class once
// the scheduler picked node for it: the selected node and the binder's
// storage-provisioner annotations set.
func wffcClaim(name, node string, labels map[string]string) *corev1.PersistentVolumeClaim {
	class, fs := className, corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels,
			Annotations: map[string]string{annSelectedNode: node,
				storagehelpers.AnnStorageProvisioner: driverName, storagehelpers.AnnBetaStorageProvisioner: driverName}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeMode: &fs,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
}

// provisionerPath is the provisioner binary a stack runs.
func provisionerPath(t *testing.T, e *env, label string) string {
	switch label {
	case "ep":
		path, err := cluster.Tool("csi-provisioner")
		if err != nil {
			t.Fatal(err)
		}
		return path
	case "base":
		return e.baseBin
	}
	return cluster.BuildBinary(t, "./cmd/provisioner")
}

// startDrivers starts every node's driver, on its seeded folder, and
// waits until each serves.
func startDrivers(t *testing.T, e *env, label string) []*prov {
	pods := make([]*prov, e.s.nodes)
	for j := range e.s.nodes {
		node := nodeName(j)
		p := &prov{node: node, socket: filepath.Join(e.roots[j], label+".sock"), metrics: cluster.FreeAddr(t)}
		p.driver = e.c.Run(t, cluster.ProcessOptions{Name: label + "-driver-" + node, Path: e.driverBin,
			Args: []string{"--endpoint=" + p.socket, "--node-id=" + node, "--root=" + filepath.Join(e.roots[j], "root"),
				"--capacity=100Ti", "-v=2"}})
		pods[j] = p
	}
	for _, p := range pods {
		if err := waitLog(t.Context(), p.driver, `"Serving"`, 2*time.Minute); err != nil {
			t.Fatalf("driver of %s: %v", p.node, err)
		}
	}
	return pods
}

// startProvisioner starts p's provisioner (the binary at path) as
// deploy/csi's DaemonSet runs it, or starts it again once stopped (its log
// goes on).
func startProvisioner(t *testing.T, e *env, label, path string, p *prov) {
	args := []string{"--kubeconfig=" + e.kubeconfig, "--csi-address=" + p.socket, "--node-deployment=true",
		"--enable-capacity=true", "--capacity-ownerref-level=-1", "--leader-election=false",
		"--http-endpoint=" + p.metrics, "--v=2"}
	if e.s.qps > 0 {
		args = append(args, fmt.Sprintf("--kube-api-qps=%d", e.s.qps), fmt.Sprintf("--kube-api-burst=%d", 2*e.s.qps))
	}
	if e.s.pprof != "" {
		args = append(args, "--enable-pprof") // tether's and EP's flag
	}
	p.started, p.syncedAt, p.caughtUpAt = time.Now(), time.Time{}, time.Time{}
	if p.proc != nil {
		if err := p.proc.Start(); err != nil {
			t.Fatalf("starting the provisioner of %s again: %v", p.node, err)
		}
		return
	}
	if e.s.memLimitMiB > 0 && label != "ep" {
		// A cgroup of its own for the process and its restarts, removed
		// when the test ends.
		path, args = cluster.InCgroup(cluster.MemoryCgroup(t, int64(e.s.memLimitMiB)<<20), path, args...)
	}
	p.proc = e.c.Run(t, cluster.ProcessOptions{Name: label + "-provisioner-" + p.node, Path: path, Args: args,
		Env: []string{"NODE_NAME=" + p.node, "NAMESPACE=" + namespace}})
}

// hold lets d pass, or the test end.
func hold(t *testing.T, d time.Duration) {
	select {
	case <-time.After(d):
	case <-t.Context().Done():
	}
}

// waitLog waits until p's log holds text.
func waitLog(ctx context.Context, p *cluster.Process, text string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		data, err := os.ReadFile(p.LogPath)
		if err == nil && bytes.Contains(data, []byte(text)) {
			return nil
		}
		if !p.Running() {
			return fmt.Errorf("%s exited before logging %q: %s", p.LogPath, text, cluster.Tail(p.LogPath, 10))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no %q within %s", p.LogPath, text, timeout)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitSynced waits until each provisioner has logged syncedMarker, and
// notes when each did (within the poll's 100 ms). It reads each log from
// where it stopped.
func waitSynced(ctx context.Context, pods []*prov, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := 0
		for _, p := range pods {
			if !p.syncedAt.IsZero() {
				continue
			}
			if found, err := p.scanLog(); err == nil && found {
				p.syncedAt = time.Now()
				continue
			}
			if !p.proc.Running() {
				return fmt.Errorf("the provisioner of %s exited before its caches synced: %s", p.node, cluster.Tail(p.proc.LogPath, 10))
			}
			left++
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d provisioners not synced within %s", left, len(pods), timeout)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// scanLog reads the provisioner's log from where the last call stopped
// and reports whether the new part holds syncedMarker.
func (p *prov) scanLog() (bool, error) {
	f, err := os.Open(p.proc.LogPath)
	if err != nil {
		return false, err
	}
	defer f.Close()
	// Back a little: the marker may straddle the last read's end.
	from := max(0, p.logOffset-int64(len(syncedMarker)))
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return false, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return false, err
	}
	p.logOffset = from + int64(len(data))
	return bytes.Contains(data, []byte(syncedMarker)), nil
}

// waitCaughtUp waits until no provisioner's listing runs behind its watch
// any more (tether_provisioner_listing_behind is 0 for claims and PVs),
// and notes when each caught up (within the poll's 100 ms). One without
// the gauge (EP's, or a tether of before it) synced on a whole listing.
func waitCaughtUp(ctx context.Context, pods []*prov, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	done := make([]bool, len(pods))
	for {
		left := 0
		for i, p := range pods {
			if done[i] {
				continue
			}
			if !p.syncedAt.IsZero() && caughtUp(p) {
				done[i] = true
				continue
			}
			left++
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d provisioners' listings still behind the watch after %s", left, len(pods), timeout)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// listingBehind reads tether_provisioner_listing_behind from a
// provisioner's metrics endpoint: whether a listing runs behind the watch,
// and whether it has the gauge at all.
func listingBehind(addr string) (behind, has bool) {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	const gauge = "tether_provisioner_listing_behind"
	if err != nil || resp.StatusCode != http.StatusOK || !benchkit.HasMetric(string(data), gauge) {
		return false, false
	}
	return benchkit.MetricSum(string(data), gauge, nil) > 0, true
}

// heapInUse reads go_memstats_heap_inuse_bytes from a provisioner's
// metrics endpoint.
func heapInUse(addr string) (int64, bool) {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !benchkit.HasMetric(string(data), "go_memstats_heap_inuse_bytes") {
		return 0, false
	}
	return int64(benchkit.MetricSum(string(data), "go_memstats_heap_inuse_bytes", nil)), true
}

// klogError is a klog error line: E, then the month and day.
var klogError = regexp.MustCompile(`^E\d{4} `)

// varying are the parts of a log line that differ between lines of one
// kind: object names with UIDs or random suffixes, addresses.
var varying = regexp.MustCompile(`pvc-[0-9a-f-]{36}|csisc-[a-z0-9]{5}|0x[0-9a-f]+|new-[a-z]+-node-[0-9]+-[0-9]+|data-db-[0-9]+`)

// errorKind is an error line without what varies between lines of its kind.
func errorKind(msg string) string { return varying.ReplaceAllString(msg, "…") }

// errorLines counts a log's klog error lines by kind (errorKind, without
// their header: time, thread, file), and returns the log's size.
func errorLines(path string) (kinds map[string]int, size int64) {
	kinds = map[string]int{}
	f, err := os.Open(path)
	if err != nil {
		return kinds, 0
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !klogError.MatchString(line) {
			continue
		}
		if _, msg, ok := strings.Cut(line, "] "); ok {
			line = msg
		}
		line = errorKind(line)
		if len(line) > 240 {
			line = line[:240] + "…"
		}
		kinds[line]++
	}
	return kinds, size
}

// newClaims makes perNode new claims on each running node, as a
// StatefulSet's would be once the scheduler picked the node: with the
// binder's storage-provisioner annotations and the scheduler's
// selected-node. The bench does the binder's part (bench.BindWrites once
// the PV is there; Released once the claim is deleted): no binder runs,
// so that the API server's watches are the provisioners' alone. It
// returns how many it made, the times from creation to the PV seen and
// from deletion to the PV gone, and how many failed.
func newClaims(t *testing.T, e *env, label string, pods []*prov, perNode int) (n int, toPV, toGone []time.Duration, failed int) {
	ctx, cancel := context.WithTimeout(t.Context(), e.s.timeout)
	defer cancel()
	list, err := e.admin.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Errorf("%s: %v", label, err)
		return 0, nil, nil, 0
	}
	w, err := e.admin.CoreV1().PersistentVolumes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Errorf("%s: %v", label, err)
		return 0, nil, nil, 0
	}
	defer w.Stop()

	type state struct {
		node              string
		created, deleted  time.Time
		pvSeen, pvGone    time.Time
		pv                string
		bound, bindFailed bool
	}
	var mu sync.Mutex
	claims := map[string]*state{}
	var names []string
	for _, p := range pods {
		for k := range perNode {
			name := fmt.Sprintf("new-%s-%s-%03d", label, p.node, k)
			claims[name] = &state{node: p.node}
			names = append(names, name)
		}
	}
	toBind := make(chan string, len(names))
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ev := range w.ResultChan() {
			pv, ok := ev.Object.(*corev1.PersistentVolume)
			if !ok || pv.Spec.ClaimRef == nil {
				continue
			}
			now := time.Now()
			mu.Lock()
			st, ok := claims[pv.Spec.ClaimRef.Name]
			if ok {
				switch ev.Type {
				case watch.Added, watch.Modified:
					if st.pvSeen.IsZero() {
						st.pvSeen, st.pv = now, pv.Name
						toBind <- pv.Spec.ClaimRef.Name
					}
				case watch.Deleted:
					if st.pvGone.IsZero() {
						st.pvGone = now
					}
				}
			}
			mu.Unlock()
		}
	}()

	if err := parallel(ctx, 32, len(names), func(i int) error {
		name := names[i]
		mu.Lock()
		node := claims[name].node
		mu.Unlock()
		c := wffcClaim(name, node, map[string]string{"app.kubernetes.io/name": "new", "app.kubernetes.io/instance": "new-" + node})
		at := time.Now()
		mu.Lock()
		claims[name].created = at
		mu.Unlock()
		_, err := e.admin.CoreV1().PersistentVolumeClaims(namespace).Create(ctx, c, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Errorf("%s: creating the new claims: %v", label, err)
		return 0, nil, nil, 0
	}
	n = len(names)

	// Bind each as its PV shows up, as a binder would.
	var bindWG sync.WaitGroup
	bindSem := make(chan struct{}, 16)
	for range names {
		var name string
		select {
		case name = <-toBind:
		case <-ctx.Done():
		}
		if name == "" {
			break
		}
		bindWG.Add(1)
		bindSem <- struct{}{}
		go func() {
			defer func() { <-bindSem; bindWG.Done() }()
			mu.Lock()
			st := claims[name]
			pvName := st.pv
			mu.Unlock()
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				pv, err := e.admin.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
				if err != nil {
					return err
				}
				c, err := e.admin.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				return bench.BindWrites(ctx, e.admin, pv, c)
			})
			mu.Lock()
			st.bound, st.bindFailed = err == nil, err != nil
			mu.Unlock()
			if err != nil {
				t.Logf("%s: binding %s: %v", label, name, err)
			}
		}()
	}
	bindWG.Wait()

	// Delete them; each PV is Released once its claim is gone.
	if err := parallel(ctx, 32, len(names), func(i int) error {
		name := names[i]
		mu.Lock()
		st := claims[name]
		st.deleted = time.Now()
		pvName := st.pv
		mu.Unlock()
		if err := e.admin.CoreV1().PersistentVolumeClaims(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if pvName == "" {
			return nil
		}
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pv, err := e.admin.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			pv.Status.Phase = corev1.VolumeReleased
			_, err = e.admin.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{})
			return err
		})
	}); err != nil {
		t.Errorf("%s: deleting the new claims: %v", label, err)
	}
	// Until every PV is gone, or the time is up.
	for ctx.Err() == nil {
		mu.Lock()
		left := 0
		for _, st := range claims {
			if st.pv != "" && st.pvGone.IsZero() {
				left++
			}
		}
		mu.Unlock()
		if left == 0 {
			break
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	w.Stop()
	<-watchDone
	mu.Lock()
	defer mu.Unlock()
	for _, st := range claims {
		switch {
		case st.pvSeen.IsZero() || st.pvGone.IsZero() || st.bindFailed:
			failed++
		}
		if !st.pvSeen.IsZero() {
			toPV = append(toPV, st.pvSeen.Sub(st.created))
		}
		if !st.pvGone.IsZero() {
			toGone = append(toGone, st.pvGone.Sub(st.deleted))
		}
	}
	if failed > 0 {
		t.Errorf("%s: %d of %d new claims got no PV, or their PV was not deleted, within %s", label, failed, n, e.s.timeout)
	}
	return n, toPV, toGone, failed
}

// churnTarget is the j-th claim the churn updates: round robin over the
// cluster's nodes, and over each node's claims.
func churnTarget(j, n, clusterNodes int) int {
	perNode := max(1, n/clusterNodes)
	node := j % clusterNodes
	k := (j / clusterNodes * 7919) % perNode // a prime stride: not always the same claims
	return k*clusterNodes + node
}

// churn updates a label of e.s.churn claims spread over every node's claims,
// 32 at a time, and returns how many were claims of the running nodes (the
// first running of the cluster's).
func churn(ctx context.Context, e *env, label string, running int) (onRunning int, err error) {
	s := e.s
	for j := range s.churn {
		if churnTarget(j, s.n, s.clusterNodes)%s.clusterNodes < running {
			onRunning++
		}
	}
	err = parallel(ctx, 32, s.churn, func(j int) error {
		i := churnTarget(j, s.n, s.clusterNodes)
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{"bench.tether.dev/churn":"%s-%d"}}}`, label, j)
		_, err := e.admin.CoreV1().PersistentVolumeClaims(namespace).Patch(ctx, claimName(i), types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	return onRunning, err
}

// settleWatchEvents waits until the API server's count of watch events of
// resource stops growing (two readings a second apart agree, at most 60
// s), and returns its metrics then.
func settleWatchEvents(t *testing.T, e *env, resource string) string {
	m := e.apiMetrics(t)
	last := benchkit.MetricSum(m, "apiserver_watch_events_total", map[string]string{"resource": resource})
	for range 60 {
		hold(t, time.Second)
		next := e.apiMetrics(t)
		v := benchkit.MetricSum(next, "apiserver_watch_events_total", map[string]string{"resource": resource})
		m = next
		if v == last {
			break
		}
		last = v
	}
	return m
}
