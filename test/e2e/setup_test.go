// Package e2e runs tether on a local cluster the way deploy/csi installs it:
// kube-controller-manager with every default controller but its PV binder,
// kube-scheduler, two fake nodes, and our components authenticating as the
// ServiceAccounts of deploy/csi with exactly its RBAC.
package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tether-csi/tether/test/cluster"
)

const namespace = "tether-system"

// env is one e2e cluster with tether on it.
type env struct {
	c     *cluster.Cluster
	stack *cluster.Stack
	root  string
}

// The controllers a real cluster runs, less the PV binder (ours replaces
// it) and the node lifecycle controller (the fake nodes have no kubelet to
// renew their leases).
var kcmControllers = []string{"*", "-persistentvolume-binder-controller", "-node-lifecycle-controller"}

func setUp(t *testing.T) *env {
	t.Helper()
	c := cluster.Start(t, cluster.Options{Scheduler: true, Controllers: kcmControllers})
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{c: c, root: root}

	// The whole tree must be acceptable to the API server as it is. A
	// server-side dry run cannot create the namespace its objects need, so
	// that one goes first.
	e.run(t, nil, "apply", "-f", filepath.Join(root, "deploy/csi/base/namespace.yaml"))
	e.run(t, nil, "apply", "--dry-run=server", "-k", filepath.Join(root, "deploy/csi"))
	// What a driver installed by its chart applies beside it: the
	// components' extra RBAC and the binder (docs/own-driver.md).
	e.run(t, nil, "apply", "--dry-run=server", "-k", filepath.Join(root, "examples/helm"))
	// For real: everything but the workloads, which need a kubelet to run.
	manifests := e.run(t, nil, "kustomize", filepath.Join(root, "deploy/csi"))
	e.run(t, withoutWorkloads(manifests), "apply", "-f", "-")

	binderKC := e.serviceAccountKubeconfig(t, "tether-binder")
	provKC := e.serviceAccountKubeconfig(t, "tether-provisioner")
	e.stack = cluster.StartLocalStack(t, c, cluster.StackOptions{
		BinderReplicas: 2, BinderKubeconfig: binderKC, ProvisionerKubeconfig: provKC, Namespace: namespace,
	})
	t.Cleanup(func() { e.checkNoForbidden(t) })
	return e
}

// run runs kubectl as the admin and returns its output.
func (e *env) run(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	return e.c.Kubectl(t, stdin, args...)
}

// apply applies a file of examples/.
func (e *env) apply(t *testing.T, example string) {
	t.Helper()
	e.run(t, nil, "apply", "-f", filepath.Join(e.root, "examples", example))
}

// withoutWorkloads drops the Deployments and DaemonSets from a YAML stream.
func withoutWorkloads(manifests []byte) []byte {
	var keep [][]byte
	for _, doc := range bytes.Split(manifests, []byte("\n---\n")) {
		if bytes.Contains(doc, []byte("\nkind: Deployment\n")) || bytes.Contains(doc, []byte("\nkind: DaemonSet\n")) {
			continue
		}
		keep = append(keep, doc)
	}
	return bytes.Join(keep, []byte("\n---\n"))
}

// serviceAccountKubeconfig is a kubeconfig for a ServiceAccount of
// deploy/csi.
func (e *env) serviceAccountKubeconfig(t *testing.T, sa string) string {
	path, _ := e.c.ServiceAccountKubeconfig(t, namespace, sa)
	return path
}

// checkNoForbidden fails the test when a component was refused anything:
// the deployed RBAC must be enough.
func (e *env) checkNoForbidden(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join(e.c.Dir, "*.log"))
	for _, l := range logs {
		name := filepath.Base(l)
		if !strings.HasPrefix(name, "binder") && !strings.HasPrefix(name, "provisioner") {
			continue
		}
		data, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "forbidden") || strings.Contains(line, "Forbidden") {
				t.Errorf("%s was refused by RBAC: %s", name, line)
				break
			}
		}
	}
}
