package cluster

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeployNamespace is where deploy/csi installs tether.
const DeployNamespace = "tether-system"

// deployOverlay is the only change made to deploy/csi on real nodes: image
// names (ours, made and imported locally; the registrar is
// examples/local-driver/registrar, since node-driver-registrar cannot be
// fetched here), and the API server's address for the pods that talk to it
// (these clusters have no kube-proxy to serve the kubernetes Service). Host
// paths stay as shipped: each node's mount namespace has its own
// /var/lib/kubelet and /var/lib/tether-local.
const deployOverlay = `apiVersion: kustomize.config.k8s.io/v1beta1
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

// DeployCSI applies deploy/csi, as shipped but for deployOverlay's images
// and API address, to a cluster whose nodes are real (StartRealNode with
// NodeImages), and waits until it runs: the binder's replicas ready, the
// tether-local DaemonSet ready on every node and the driver registered
// with every node's kubelet. It returns the time from apply to running.
// patches are more kustomize patches (each a strategic merge patch in
// YAML), for tests that change the deployment (UpstreamPatches).
func (c *Cluster) DeployCSI(t T, nodes []string, patches ...string) time.Duration {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "deploy"), os.DirFS(filepath.Join(root, "deploy"))); err != nil {
		t.Fatal(err)
	}
	api, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf("{name: KUBERNETES_SERVICE_HOST, value: %q}, {name: KUBERNETES_SERVICE_PORT, value: %q}", api.Hostname(), api.Port())
	untagged := func(ref string) string { return strings.TrimSuffix(ref, ":e2e") }
	k := fmt.Sprintf(deployOverlay, untagged(BinderImage), untagged(ProvisionerImage), untagged(DriverImage),
		untagged(RegistrarImage), env)
	for _, p := range patches {
		k += "  - patch: |\n      " + strings.ReplaceAll(strings.TrimSpace(p), "\n", "\n      ") + "\n"
	}
	if err := os.MkdirAll(filepath.Join(dir, "test"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "test", "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	manifests := c.Kubectl(t, nil, "kustomize", filepath.Join(dir, "test"))
	applied := time.Now()
	c.Kubectl(t, manifests, "apply", "-f", "-")
	c.WaitDeployed(t, nodes)
	return time.Since(applied)
}

// Kubectl runs kubectl as the admin and returns its output, or fails the
// test with it.
func (c *Cluster) Kubectl(t T, stdin []byte, args ...string) []byte {
	t.Helper()
	kubectl, err := Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), kubectl, append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.Bytes()
}

// WaitDeployed waits for deploy/csi's binder replicas, its DaemonSet's pods
// on the nodes and the driver's registration with their kubelets, then
// logs any container restart.
func (c *Cluster) WaitDeployed(t T, nodes []string) {
	t.Helper()
	apps := c.Client.AppsV1()
	Eventually(t, "binder Deployment ready", func(ctx context.Context) (bool, error) {
		d, err := apps.Deployments(DeployNamespace).Get(ctx, "tether-binder", metav1.GetOptions{})
		return err == nil && d.Spec.Replicas != nil && d.Status.ReadyReplicas == *d.Spec.Replicas, nil
	})
	Eventually(t, "tether-local DaemonSet ready on every node", func(ctx context.Context) (bool, error) {
		ds, err := apps.DaemonSets(DeployNamespace).Get(ctx, "tether-local", metav1.GetOptions{})
		return err == nil && int(ds.Status.NumberReady) == len(nodes), nil
	})
	for _, name := range nodes {
		c.WaitDriverRegistered(t, name)
	}
	c.LogRestarts(t)
}

// WaitDriverRegistered waits until kubelet on a node lists the local
// driver in its CSINode.
func (c *Cluster) WaitDriverRegistered(t T, node string) {
	t.Helper()
	Eventually(t, "driver registered on "+node, func(ctx context.Context) (bool, error) {
		cn, err := c.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == LocalDriver }), nil
	})
}

// LogRestarts logs the previous run of every restarted container of
// deploy/csi's pods, with its last state.
func (c *Cluster) LogRestarts(t T) {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(DeployNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tail := int64(15)
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			if st.RestartCount == 0 {
				continue
			}
			prev, _ := c.Client.CoreV1().Pods(DeployNamespace).GetLogs(p.Name,
				&corev1.PodLogOptions{Container: st.Name, Previous: true, TailLines: &tail}).DoRaw(t.Context())
			t.Logf("%s/%s restarted %d times, last state %+v; its previous run ended:\n%s",
				p.Name, st.Name, st.RestartCount, st.LastTerminationState.Terminated, prev)
		}
	}
}
