package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tether-csi/tether/test/cluster"
)

const (
	node      = "node-1"
	namespace = "default"
	class     = "slow"
	// workers is each provisioner's --worker-threads: with the driver's
	// latency, N claims take N/workers rounds of it, so that claims are
	// in flight while the versions change.
	workers = 20
)

// kcmControllers: KCM without its binder (tether's runs), as test/e2e's.
var kcmControllers = []string{"*", "-persistentvolume-binder-controller", "-node-lifecycle-controller"}

// env is one case's control plane and its fake nodes, each with the
// example local driver (a current build: the driver is not what is
// upgraded) behind a delay proxy that makes every CSI call take latency.
type env struct {
	t       *testing.T
	c       *cluster.Cluster
	drivers []*nodeDriver // one per node
	mock    *mockDriver   // the clones' driver, if started (startMock)
	// multi: several nodes, whose processes' names say their node.
	multi   bool
	latency time.Duration
	// started counts the processes of each name prefix, so that each
	// start has a log of its own.
	started map[string]int
}

// nodeDriver is one node's local driver: its folder, its socket and the
// slow socket in front of it, and each of its starts (a DaemonSet's roll
// starts it again on the same folder, each start with its own log).
type nodeDriver struct {
	node string
	root string // the driver's --root; volumes are folders in root/volumes
	// socket is the driver's, slow the proxy's in front of it, which the
	// provisioners and the csi-snapshotter use.
	socket, slow string
	path         string // the driver's binary
	runs         []*cluster.Process
}

// logs are the paths of the logs of each start of the driver.
func (d *nodeDriver) logs() []string {
	var paths []string
	for _, p := range d.runs {
		paths = append(paths, p.LogPath)
	}
	return paths
}

// startEnv starts a control plane with one fake node, node, its driver and
// an Immediate class.
func startEnv(t *testing.T, driver string, latency time.Duration) *env {
	t.Helper()
	return startNodes(t, driver, latency, []string{node}, storagev1.VolumeBindingImmediate)
}

// startNodes starts a control plane with a fake node of each name, each
// with its own driver, and the class, of the binding mode given.
func startNodes(t *testing.T, driver string, latency time.Duration, nodes []string, binding storagev1.VolumeBindingMode) *env {
	t.Helper()
	c := cluster.Start(t, cluster.Options{Scheduler: true, Controllers: kcmControllers,
		APIServerArgs: map[string][]string{"max-requests-inflight": {"1000"}, "max-mutating-requests-inflight": {"500"}}})
	ctx := t.Context()
	no := false
	if _, err := c.Client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: cluster.LocalDriver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &no}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := corev1.PersistentVolumeReclaimDelete
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Provisioner: cluster.LocalDriver, VolumeBindingMode: &binding, ReclaimPolicy: &policy}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: c, latency: latency, multi: len(nodes) > 1, started: map[string]int{}}
	for _, name := range nodes {
		if err := cluster.AddFakeNode(ctx, c.Client, cluster.FakeNode{Name: name, Labels: map[string]string{cluster.LocalKey: name},
			Driver: cluster.LocalDriver, TopologyKeys: []string{cluster.LocalKey}}); err != nil {
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp("", "upg") // socket paths must be short
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		d := &nodeDriver{node: name, root: filepath.Join(dir, "root"), socket: filepath.Join(dir, "csi.sock"),
			slow: filepath.Join(dir, "slow.sock"), path: driver}
		e.drivers = append(e.drivers, d)
		e.startDriver(d)
		proxy, err := cluster.StartUnixDelayProxy(d.slow, d.socket, latency/2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = proxy.Close() })
	}
	return e
}

// startDriver starts d's driver, a log of its own for each start, and
// waits until it serves. The proxy dials the socket for each connection:
// it outlives the driver's restarts.
func (e *env) startDriver(d *nodeDriver) {
	e.t.Helper()
	name := "driver"
	if e.multi {
		name += "-" + d.node
	}
	if len(d.runs) > 0 {
		name += fmt.Sprintf("-%d", len(d.runs)+1)
	}
	p := e.c.Run(e.t, cluster.ProcessOptions{Name: name, Path: d.path, Args: []string{"--endpoint=" + d.socket,
		"--node-id=" + d.node, "--root=" + d.root, "--capacity=100Ti", "-v=5"}})
	d.runs = append(d.runs, p)
	e.waitLog(p, `"Serving"`)
}

// poll polls cond every 100ms until it holds, or fails the test after
// timeout (cluster.Eventually's, with a deadline of the caller's).
func (e *env) poll(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	if err := wait.PollUntilContextTimeout(e.t.Context(), 100*time.Millisecond, timeout, true, cond); err != nil {
		e.t.Fatalf("%s, within %s: %v", what, timeout, err)
	}
}

// run starts a process named after its role and version, each start with
// a log of its own (<role>-<version>-<n>.log in the cluster's folder).
func (e *env) run(role string, b Binaries, path string, args []string, envs ...string) *cluster.Process {
	e.t.Helper()
	prefix := role + "-" + b.Version
	e.started[prefix]++
	name := fmt.Sprintf("%s-%d", prefix, e.started[prefix])
	e.t.Logf("%s: start %s", time.Now().Format("15:04:05.000"), name)
	return e.c.Run(e.t, cluster.ProcessOptions{Name: name, Path: path, Args: args, Env: envs})
}

// leaderArgs are the leader election flags with short timings (those of
// cluster.StartLocalStack), or leader election off.
func leaderArgs(elect bool, prefix string) []string {
	if !elect {
		return []string{"--" + prefix + "=false"}
	}
	args := []string{"--" + prefix + "=true", "--" + prefix + "-lease-duration=4s",
		"--" + prefix + "-renew-deadline=3s", "--" + prefix + "-retry-period=500ms"}
	if prefix == "leader-election" {
		return append(args, "--leader-election-namespace="+namespace)
	}
	return append(args, "--leader-elect-resource-namespace="+namespace)
}

// provisioner starts a node-deployment provisioner of version b on node's
// slow socket; elect turns leader election on (two replicas).
func (e *env) provisioner(b Binaries, elect bool) *cluster.Process {
	e.t.Helper()
	return e.provisionerOn(e.drivers[0], b, elect, workers)
}

// provisionerOn starts a node-deployment provisioner of version b beside
// d's driver, with workers workers.
func (e *env) provisionerOn(d *nodeDriver, b Binaries, elect bool, workers int) *cluster.Process {
	e.t.Helper()
	args := append([]string{"--kubeconfig=" + e.c.Kubeconfig, "--csi-address=" + d.slow, "--node-deployment",
		"--node-deployment-base-delay=200ms", "--node-deployment-max-delay=2s",
		"--retry-interval-start=200ms", "--retry-interval-max=5s", fmt.Sprintf("--worker-threads=%d", workers), "-v=4"},
		leaderArgs(elect, "leader-election")...)
	role := "provisioner"
	if e.multi {
		role += "-" + d.node
	}
	return e.run(role, b, b.Provisioner, args, "NODE_NAME="+d.node, "NAMESPACE="+namespace)
}

// binder starts a binder of version b; elect turns leader election on.
func (e *env) binder(b Binaries, elect bool) *cluster.Process {
	e.t.Helper()
	args := append([]string{"--kubeconfig=" + e.c.Kubeconfig, "--resync-period=5s", "-v=4"}, leaderArgs(elect, "leader-elect")...)
	return e.run("binder", b, b.Binder, args)
}

// waitLeader waits until p logs that it leads.
func (e *env) waitLeader(p *cluster.Process) {
	e.t.Helper()
	e.waitLog(p, "Became leader")
}

// waitLog waits until p's log holds text.
func (e *env) waitLog(p *cluster.Process, text string) {
	e.t.Helper()
	e.poll(p.LogPath+": "+text, 2*time.Minute, func(context.Context) (bool, error) {
		data, err := os.ReadFile(p.LogPath)
		return err == nil && strings.Contains(string(data), text), nil
	})
}

// stop stops p as a rolling update does (SIGTERM; SIGKILL after 10 s).
func (e *env) stop(p *cluster.Process) {
	e.t.Helper()
	e.t.Logf("%s: stop %s", time.Now().Format("15:04:05.000"), filepath.Base(p.LogPath))
	p.Stop(10 * time.Second)
}

// pod is one node's pod of the example driver's DaemonSet in
// node-deployment mode (deploy/csi/local/node-plugin.yaml): the driver and
// a provisioner beside it, without leader election (one pod per node).
type pod struct {
	d           *nodeDriver
	version     string
	provisioner *cluster.Process
}

// nodeWorkers is each node's provisioner's --worker-threads in the
// DaemonSet's case for n claims: fewer than workers, so that each node's
// claims are still in flight when the roll reaches it, and the rollback
// after it (a node's claims take 7 rounds of the latency at 40 claims, 22
// at 200).
func nodeWorkers(n int) int { return max(2, n/60) }

// startPod starts the pod of version b on d's node, for n claims; d's driver is running
// (startNodes starts it, stopPod stops it). It returns once the driver
// serves: the pod's containers run, which makes it Ready (the DaemonSet
// has no readiness probe), not once the provisioner has started.
func (e *env) startPod(d *nodeDriver, b Binaries, n int) *pod {
	e.t.Helper()
	if !d.runs[len(d.runs)-1].Running() {
		e.startDriver(d)
	}
	return &pod{d: d, version: b.Version, provisioner: e.provisionerOn(d, b, false, nodeWorkers(n))}
}

// stopPod stops a pod as the kubelet does: SIGTERM to each container at
// once, SIGKILL after the grace.
func (e *env) stopPod(p *pod) {
	e.t.Helper()
	e.t.Logf("%s: stop the pod of %s on %s", time.Now().Format("15:04:05.000"), p.version, p.d.node)
	var wg sync.WaitGroup
	wg.Go(func() { p.provisioner.Stop(10 * time.Second) })
	p.d.runs[len(p.d.runs)-1].Stop(10 * time.Second)
	wg.Wait()
}

// roll rolls the DaemonSet to version b as its RollingUpdate does by
// default (maxUnavailable 1, maxSurge 0): one node at a time, the old pod
// stopped, then the new one started, and the next node once it is Ready.
// Then it waits until each new provisioner has started its controller (it
// takes a few calls to the slow driver), as one would before rolling back.
func (e *env) roll(pods []*pod, b Binaries, n int, tr *tracker) {
	e.t.Helper()
	for i, p := range pods {
		e.t.Logf("%s: roll %s to %s at %s", time.Now().Format("15:04:05.000"), p.d.node, b.Version, tr.progress())
		e.stopPod(p)
		pods[i] = e.startPod(p.d, b, n)
	}
	for _, p := range pods {
		e.waitLog(p.provisioner, "Started provisioner controller")
	}
	e.t.Logf("%s: rolled to %s at %s", time.Now().Format("15:04:05.000"), b.Version, tr.progress())
}
