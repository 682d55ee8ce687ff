package e2e

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// realEnv is a control plane with two real nodes (kubelet, containerd)
// running deploy/csi as pods.
type realEnv struct {
	env
	nodes map[string]*cluster.RealNode
	// applied is when deploy/csi was applied.
	applied time.Time
}

// startReal starts a control plane for real nodes (kube-scheduler, KCM
// without its PV binder, with kcmArgs), with no node yet.
func startReal(t *testing.T, kcmArgs ...string) *realEnv {
	t.Helper()
	cluster.CheckRealNodeHost(t)
	c := cluster.Start(t, cluster.Options{RealNodes: true, Scheduler: true,
		Controllers: []string{"*", "-persistentvolume-binder-controller"}, ControllerManagerArgs: kcmArgs})
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return &realEnv{env: env{c: c, root: root}, nodes: map[string]*cluster.RealNode{}}
}

func setUpReal(t *testing.T) *realEnv { return setUpRealWith(t, realOptions{}) }

// realOptions change setUpReal's cluster: kube-controller-manager's extra
// flags, and kustomize patches of deploy/csi (cluster.DeployCSI).
type realOptions struct {
	kcmArgs, patches []string
}

func setUpRealWith(t *testing.T, o realOptions) *realEnv {
	t.Helper()
	start := time.Now()
	e := startReal(t, o.kcmArgs...)
	c := e.c
	images := cluster.NodeImages(t)
	for _, name := range []string{"node-1", "node-2"} {
		e.nodes[name] = c.StartRealNode(t, name, images)
	}
	t.Logf("control plane and 2 real nodes Ready in %s", time.Since(start).Round(100*time.Millisecond))

	// deploy/csi as shipped, through the test's overlay of image names.
	took := c.DeployCSI(t, slices.Sorted(maps.Keys(e.nodes)), o.patches...)
	e.applied = time.Now().Add(-took)
	t.Logf("deploy/csi running (binder 2/2, tether-local 2/2, driver registered on both nodes) %s after apply",
		took.Round(100*time.Millisecond))
	c.CheckRunsReleaseImages(t)
	return e
}

// waitDeployed waits until deploy/csi runs again on both nodes.
func (e *realEnv) waitDeployed(t *testing.T) {
	t.Helper()
	e.c.WaitDeployed(t, slices.Sorted(maps.Keys(e.nodes)))
}

// driverPod is the DaemonSet's pod on a node.
func (e *realEnv) driverPod(t *testing.T, node string) *corev1.Pod {
	t.Helper()
	var out *corev1.Pod
	cluster.Eventually(t, "tether-local pod on "+node, func(ctx context.Context) (bool, error) {
		pods, err := e.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tether-local"})
		if err != nil {
			return false, nil
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Spec.NodeName == node && p.DeletionTimestamp == nil {
				out = p
				return true, nil
			}
		}
		return false, nil
	})
	return out
}
