package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// env is one case's control plane and its one fake node: the example local
// driver (a current build: the driver is not what is upgraded) and, in front
// of its socket, a delay proxy that makes every CSI call take latency.
type env struct {
	t       *testing.T
	c       *cluster.Cluster
	root    string // the driver's --root; volumes are folders in root/volumes
	driver  *cluster.Process
	slow    string // the socket the provisioners use
	latency time.Duration
	// started counts the processes of each name prefix, so that each
	// start has a log of its own.
	started map[string]int
}

func startEnv(t *testing.T, driver string, latency time.Duration) *env {
	t.Helper()
	c := cluster.Start(t, cluster.Options{Scheduler: true, Controllers: kcmControllers,
		APIServerArgs: map[string][]string{"max-requests-inflight": {"1000"}, "max-mutating-requests-inflight": {"500"}}})
	ctx := t.Context()
	no := false
	if _, err := c.Client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: cluster.LocalDriver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &no}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.AddFakeNode(ctx, c.Client, cluster.FakeNode{Name: node, Labels: map[string]string{cluster.LocalKey: node},
		Driver: cluster.LocalDriver, TopologyKeys: []string{cluster.LocalKey}}); err != nil {
		t.Fatal(err)
	}
	mode, policy := storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Provisioner: cluster.LocalDriver, VolumeBindingMode: &mode, ReclaimPolicy: &policy}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "upg") // socket paths must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &env{t: t, c: c, root: filepath.Join(dir, "root"), slow: filepath.Join(dir, "slow.sock"), latency: latency, started: map[string]int{}}
	socket := filepath.Join(dir, "csi.sock")
	e.driver = c.Run(t, cluster.ProcessOptions{Name: "driver", Path: driver, Args: []string{"--endpoint=" + socket,
		"--node-id=" + node, "--root=" + e.root, "--capacity=100Ti", "-v=5"}})
	e.poll("the driver's socket", time.Minute, func(context.Context) (bool, error) {
		_, err := os.Stat(socket)
		return err == nil, nil
	})
	proxy, err := cluster.StartUnixDelayProxy(e.slow, socket, latency/2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	return e
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

// provisioner starts a node-deployment provisioner of version b on the slow
// socket; elect turns leader election on (two replicas).
func (e *env) provisioner(b Binaries, elect bool) *cluster.Process {
	e.t.Helper()
	args := append([]string{"--kubeconfig=" + e.c.Kubeconfig, "--csi-address=" + e.slow, "--node-deployment",
		"--node-deployment-base-delay=200ms", "--node-deployment-max-delay=2s",
		"--retry-interval-start=200ms", "--retry-interval-max=5s", fmt.Sprintf("--worker-threads=%d", workers), "-v=4"},
		leaderArgs(elect, "leader-election")...)
	return e.run("provisioner", b, b.Provisioner, args, "NODE_NAME="+node, "NAMESPACE="+namespace)
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
	e.poll(p.LogPath+": Became leader", 2*time.Minute, func(context.Context) (bool, error) {
		data, err := os.ReadFile(p.LogPath)
		return err == nil && strings.Contains(string(data), "Became leader"), nil
	})
}

// stop stops p as a rolling update does (SIGTERM; SIGKILL after 10 s).
func (e *env) stop(p *cluster.Process) {
	e.t.Helper()
	e.t.Logf("%s: stop %s", time.Now().Format("15:04:05.000"), filepath.Base(p.LogPath))
	p.Stop(10 * time.Second)
}
