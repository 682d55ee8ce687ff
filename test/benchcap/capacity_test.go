// Package benchcap measures capacity publishing on many nodes: tether's
// provisioner against external-provisioner v6.4.0 (EP), each in
// centralized mode with --enable-capacity, on a local control plane with
// BENCH_NODES fake nodes, each its own topology segment, and three
// WaitForFirstConsumer classes, against a CSI driver of the bench's own
// (driver_test.go) that answers GetCapacity per segment and counts.
// `make bench-capacity`; the test skips itself unless TETHER_BENCH is set.
package benchcap

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tether-csi/tether/test/bench"
	"github.com/tether-csi/tether/test/benchout"
	"github.com/tether-csi/tether/test/cluster"

	"github.com/tether-csi/tether/test/benchkit"
)

const (
	driverName  = "capacity.csi.tether.dev"
	topologyKey = "topology.capacity.csi.tether.dev/node"
	namespace   = "default"
)

// pools are the classes' "pool" parameters: three classes, each asking the
// driver about a pool of its own.
var pools = []string{"a", "b", "c"}

func className(pool string) string { return "capacity-" + pool }

// settings are the knobs, from the environment.
type settings struct {
	nodes       int
	poll        time.Duration
	qps         int
	steadyPolls int
	changes     int
	timeout     time.Duration
	only        string
}

// TestBenchCapacity: for tether and for EP, each on a control plane of its
// own: the time until every object exists, then GetCapacity calls and API
// requests over BENCH_STEADY_POLLS poll periods in which nothing changes,
// then BENCH_CHANGES changes of one segment's capacity, one at a time.
func TestBenchCapacity(t *testing.T) {
	if os.Getenv("TETHER_BENCH") == "" {
		t.Skip("set TETHER_BENCH=1 to run the capacity bench (make bench-capacity)")
	}
	s := settings{
		nodes:       benchkit.Int(t, "BENCH_NODES", 2000, false),
		poll:        benchkit.Duration(t, "BENCH_POLL", 30*time.Second),
		qps:         benchkit.Int(t, "BENCH_QPS", 1000, false),
		steadyPolls: benchkit.Int(t, "BENCH_STEADY_POLLS", 3, false),
		changes:     benchkit.Int(t, "BENCH_CHANGES", 3, false),
		timeout:     benchkit.Duration(t, "BENCH_TIMEOUT", 10*time.Minute),
		only:        os.Getenv("BENCH_ONLY"),
	}
	var rows []row
	for _, label := range []string{"tether", "upstream"} {
		if s.only != "" && s.only != label {
			continue
		}
		started := time.Now()
		var r row
		t.Run(label, func(t *testing.T) { r = runSide(t, s, label) })
		rows = append(rows, r)
		path, err := benchout.Write(benchout.Run{Bench: "capacity", Label: label, Started: started,
			Settings: map[string]any{"nodes": s.nodes, "classes": len(pools), "poll_seconds": s.poll.Seconds(),
				"capacity_qps": s.qps, "capacity_burst": 2 * s.qps, "steady_polls": s.steadyPolls, "changes": s.changes},
			Figures: figures(r)})
		if err != nil {
			t.Error(err)
		} else {
			t.Logf("figures appended to %s", path)
		}
	}
	report := render(fmt.Sprintf("capacity bench: %d nodes (a segment each), %d WaitForFirstConsumer classes, poll %s, capacity client QPS %d (burst %d); load at the end %s",
		s.nodes, len(pools), s.poll, s.qps, 2*s.qps, benchkit.LoadAvg()), rows)
	t.Log("\n" + report)
	fmt.Print(report)
}

// runSide runs one contender on a control plane of its own.
func runSide(t *testing.T, s settings, label string) row {
	r := row{label: label}
	c := cluster.Start(t, cluster.Options{APIServerArgs: map[string][]string{
		"max-requests-inflight": {"2000"}, "max-mutating-requests-inflight": {"1000"}}})
	kubeconfig, cfg := c.AdminTokenKubeconfig(t)
	fast := rest.CopyConfig(cfg)
	fast.QPS, fast.Burst = 20000, 40000
	client := kubernetes.NewForConfigOrDie(fast)
	populate(t, client, s.nodes)
	d := newDriver()
	socket := d.serve(t)
	want := s.nodes * len(pools)
	w := watchCapacities(t, client, want)

	args := []string{"--kubeconfig=" + kubeconfig, "--csi-address=" + socket, "--leader-election=false", "-v=1",
		"--enable-capacity", "--capacity-ownerref-level=-1", "--capacity-poll-interval=" + s.poll.String(),
		fmt.Sprintf("--kube-api-capacity-qps=%d", s.qps), fmt.Sprintf("--kube-api-capacity-burst=%d", 2*s.qps)}
	path := ""
	if label == "upstream" {
		var err error
		if path, err = cluster.Tool("csi-provisioner"); err != nil {
			t.Fatal(err)
		}
	} else {
		path = cluster.BuildBinary(t, "./cmd/provisioner")
	}
	apiPID, _ := c.ControlPlanePIDs()
	before := apiRequests(t, c)
	start := time.Now()
	prov := c.Run(t, cluster.ProcessOptions{Name: label + "-provisioner", Path: path, Args: args, Env: []string{"NAMESPACE=" + namespace}})
	pids := map[string]int{"api": apiPID, "prov": prov.Pid()}

	// Start: until every object exists.
	select {
	case <-w.done:
		r.allObjects = w.completed().Sub(start)
	case <-time.After(s.timeout):
	case <-t.Context().Done():
	}
	_, r.objects = w.counts()
	r.startCalls = d.Calls()
	r.startWrites, _ = capacityRequests(before, apiRequests(t, c))
	if r.allObjects == 0 {
		r.failed = fmt.Sprintf("%d of %d objects in %s", r.objects, want, s.timeout)
		t.Error(r.failed)
		r.provRSS = benchkit.ReadMem(prov.Pid()).HWM
		return r
	}
	t.Logf("%s: every object in %s (%d GetCapacity calls, %.0f writes)", label, seconds(r.allObjects), r.startCalls, r.startWrites)

	// Let the start's work settle (a refresh it queued), then measure whole
	// poll periods.
	hold(t, s.poll)
	window := time.Duration(s.steadyPolls) * s.poll
	callsBefore, reqBefore, cpuBefore := d.bySegment(), apiRequests(t, c), benchkit.ReadCPU(pids)
	eventsBefore, _ := w.counts()
	hold(t, window)
	callsAfter, reqAfter, cpuAfter := d.bySegment(), apiRequests(t, c), benchkit.ReadCPU(pids)
	eventsAfter, _ := w.counts()
	r.steadyMinutes = window.Minutes()
	var calls int64
	for seg, n := range callsAfter {
		calls += n - callsBefore[seg]
	}
	r.callsPerMin = float64(calls) / r.steadyMinutes
	r.perSegmentPoll, r.perSegmentPollMax = perSegmentPoll(callsBefore, callsAfter, s.nodes, float64(s.steadyPolls))
	writes, reads := capacityRequests(reqBefore, reqAfter)
	r.writesPerMin, r.readsPerMin = writes/r.steadyMinutes, reads/r.steadyMinutes
	r.requestsPerMin = allRequests(reqBefore, reqAfter) / r.steadyMinutes
	r.eventsPerMin = float64(eventsAfter-eventsBefore) / r.steadyMinutes
	r.apiServerCPUPerMin = float64(cpuAfter.ByProgram["api"]-cpuBefore.ByProgram["api"]) / 100 / r.steadyMinutes
	r.provCPUPerMin = float64(cpuAfter.ByProgram["prov"]-cpuBefore.ByProgram["prov"]) / 100 / r.steadyMinutes
	t.Logf("%s: steady %s: %d GetCapacity calls, %.0f writes, %.0f reads", label, window, calls, writes, reads)

	// Changes, one at a time, in segments spread over the nodes.
	for i := range s.changes {
		node := nodeName((i*997 + 500) % s.nodes)
		pool := pools[i%len(pools)]
		free := int64(baseFree - (i+1)<<30)
		seen := w.await(key(className(pool), node), free)
		changed, told := d.change(spot{segment: node, pool: pool}, free)
		var at, answered time.Time
		deadline := time.After(3*s.poll + time.Minute)
		for at.IsZero() || answered.IsZero() {
			select {
			case tc := <-changed:
				at = tc
			case ta := <-told:
				answered = ta
			case <-deadline:
				t.Errorf("%s: change %d (%s, pool %s) did not show", label, i, node, pool)
				r.provRSS = benchkit.ReadMem(prov.Pid()).HWM
				return r
			}
		}
		select {
		case update := <-seen:
			r.changeLatency = append(r.changeLatency, update.Sub(at))
			r.answerToWrite = append(r.answerToWrite, update.Sub(answered))
			t.Logf("%s: change %d shows after %s (%s after the answer)", label, i, update.Sub(at), update.Sub(answered))
		case <-deadline:
			t.Errorf("%s: change %d (%s, pool %s) was answered but not published", label, i, node, pool)
		}
	}
	r.provRSS = benchkit.ReadMem(prov.Pid()).HWM
	return r
}

// hold lets d pass: the bench measures over a window of time.
func hold(t *testing.T, d time.Duration) {
	select {
	case <-time.After(d):
	case <-t.Context().Done():
	}
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// populate makes the CSIDriver, the classes and n nodes, 64 at a time.
func populate(t *testing.T, client kubernetes.Interface, n int) {
	t.Helper()
	ctx := t.Context()
	yes, no := true, false
	if _, err := client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driverName},
		Spec: storagev1.CSIDriverSpec{StorageCapacity: &yes, AttachRequired: &no}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	for _, p := range pools {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: className(p)}, Provisioner: driverName,
			VolumeBindingMode: &mode, Parameters: map[string]string{"pool": p}}
		if _, err := client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := make(chan int)
	for range 64 {
		wg.Go(func() {
			for i := range next {
				if err := addNode(ctx, client, nodeName(i)); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// addNode makes a Node labelled with its own segment and a CSINode that
// registers the driver with the topology key, as kubelet would.
func addNode(ctx context.Context, client kubernetes.Interface, name string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"kubernetes.io/hostname": name, topologyKey: name}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return err
	}
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{
		Drivers: []storagev1.CSINodeDriver{{Name: driverName, NodeID: name, TopologyKeys: []string{topologyKey}}}}}
	_, err := client.StorageV1().CSINodes().Create(ctx, cn, metav1.CreateOptions{})
	return err
}

func apiRequests(t *testing.T, c *cluster.Cluster) map[string]float64 {
	raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Logf("reading the API server's metrics: %v", err)
		return nil
	}
	return bench.APIRequests(string(raw))
}
