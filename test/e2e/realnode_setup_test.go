package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
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

// overlay is the test's only change to deploy/csi: image names (ours, made
// and imported locally; the registrar is examples/local-driver/registrar,
// since node-driver-registrar cannot be fetched here), and the API
// server's address for the pods that talk to it (this cluster has no
// kube-proxy to serve the kubernetes Service). Host paths stay as shipped:
// each node's mount namespace has its own /var/lib/kubelet and
// /var/lib/tether-local.
const overlay = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../deploy/csi]
images:
  - {name: ghcr.io/tether-csi/binder, newName: %[1]s, newTag: e2e}
  - {name: ghcr.io/tether-csi/provisioner, newName: %[2]s, newTag: e2e}
  - {name: ghcr.io/tether-csi/local-driver, newName: %[3]s, newTag: e2e}
  - {name: registry.k8s.io/sig-storage/csi-node-driver-registrar, newName: %[4]s, newTag: e2e}
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: tether-binder, namespace: tether-system}
      spec: {template: {spec: {containers: [{name: binder, env: [%[5]s]}]}}}
  - patch: |
      apiVersion: apps/v1
      kind: DaemonSet
      metadata: {name: tether-local, namespace: tether-system}
      spec: {template: {spec: {containers: [{name: provisioner, env: [%[5]s]}]}}}
`

func setUpReal(t *testing.T) *realEnv {
	t.Helper()
	cluster.CheckRealNodeHost(t)
	start := time.Now()
	c := cluster.Start(t, cluster.Options{RealNodes: true, Scheduler: true,
		Controllers: []string{"*", "-persistentvolume-binder-controller"}})
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := cluster.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	e := &realEnv{env: env{c: c, kubectl: kubectl, root: root}, nodes: map[string]*cluster.RealNode{}}
	images := cluster.NodeImages(t)
	for _, name := range []string{"node-1", "node-2"} {
		e.nodes[name] = c.StartRealNode(t, name, images)
	}
	t.Logf("control plane and 2 real nodes Ready in %s", time.Since(start).Round(100*time.Millisecond))

	// deploy/csi as shipped, through the overlay.
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "deploy"), os.DirFS(filepath.Join(root, "deploy"))); err != nil {
		t.Fatal(err)
	}
	api, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf("{name: KUBERNETES_SERVICE_HOST, value: %q}, {name: KUBERNETES_SERVICE_PORT, value: %q}", api.Hostname(), api.Port())
	k := fmt.Sprintf(overlay, untagged(cluster.BinderImage), untagged(cluster.ProvisionerImage), untagged(cluster.DriverImage),
		untagged(cluster.RegistrarImage), env)
	if err := os.MkdirAll(filepath.Join(dir, "test"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "test", "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	manifests := e.run(t, nil, "kustomize", filepath.Join(dir, "test"))
	e.applied = time.Now()
	e.run(t, manifests, "apply", "-f", "-")
	e.waitDeployed(t)
	t.Logf("deploy/csi running (binder 2/2, tether-local 2/2, driver registered on both nodes) %s after apply",
		time.Since(e.applied).Round(100*time.Millisecond))
	return e
}

func untagged(ref string) string { return ref[:len(ref)-len(":e2e")] }

// waitDeployed waits for the binder's replicas, the DaemonSet's pods and
// the driver's registration with kubelet on every node.
func (e *realEnv) waitDeployed(t *testing.T) {
	t.Helper()
	apps := e.c.Client.AppsV1()
	cluster.Eventually(t, "binder Deployment 2/2 ready", func(ctx context.Context) (bool, error) {
		d, err := apps.Deployments(namespace).Get(ctx, "tether-binder", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 2, nil
	})
	cluster.Eventually(t, "tether-local DaemonSet ready on both nodes", func(ctx context.Context) (bool, error) {
		ds, err := apps.DaemonSets(namespace).Get(ctx, "tether-local", metav1.GetOptions{})
		return err == nil && ds.Status.NumberReady == 2, nil
	})
	for name := range e.nodes {
		e.waitRegistered(t, name)
	}
	e.logRestarts(t)
}

// logRestarts logs the previous run of every restarted container of
// deploy/csi's pods, with its last state.
func (e *realEnv) logRestarts(t *testing.T) {
	t.Helper()
	pods, err := e.c.Client.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			if st.RestartCount == 0 {
				continue
			}
			prev, _ := e.c.Client.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: st.Name, Previous: true, TailLines: ptr(int64(15))}).DoRaw(t.Context())
			t.Logf("%s/%s restarted %d times, last state %+v; its previous run ended:\n%s", p.Name, st.Name, st.RestartCount, st.LastTerminationState.Terminated, prev)
		}
	}
}

// waitRegistered waits until kubelet on a node lists the driver in its CSINode.
func (e *realEnv) waitRegistered(t *testing.T, node string) {
	t.Helper()
	cluster.Eventually(t, "driver registered on "+node, func(ctx context.Context) (bool, error) {
		cn, err := e.c.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == cluster.LocalDriver }), nil
	})
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
