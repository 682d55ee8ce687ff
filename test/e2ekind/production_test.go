package e2ekind

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// production applies the bundle's tether-production.yaml as the README
// tells a user beside drivers of their own (its images are on the nodes
// from the load recipe): the binder runs, no part of the example driver
// is installed, the binder binds examples/prebound-pv.yaml's claim to the
// PV reserved for it, and `kubectl delete -f tether-production.yaml`
// removes it all.
func (e *env) production(t *testing.T, ctx context.Context, root, bundle string) {
	start := time.Now()
	if out, err := e.run(ctx, bundle, "kubectl", "apply", "-f", "tether-production.yaml"); err != nil {
		t.Fatalf("kubectl apply -f tether-production.yaml: %v\n%s", err, out)
	}
	e.eventually(t, ctx, 4*time.Minute, "the binder ready", func(ctx context.Context) (bool, string) {
		d, err := e.client.AppsV1().Deployments(cluster.DeployNamespace).Get(ctx, "tether-binder", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.ReadyReplicas == *d.Spec.Replicas, fmt.Sprintf("%d/%d ready", d.Status.ReadyReplicas, *d.Spec.Replicas)
	})
	sets, err := e.client.AppsV1().DaemonSets(cluster.DeployNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sets.Items) != 0 {
		t.Errorf("tether-production.yaml installed a DaemonSet: %s", names(sets.Items))
	}
	if _, err := e.client.StorageV1().StorageClasses().Get(ctx, "tether-local", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("tether-production.yaml installed the example class tether-local: %v", err)
	}

	examples := filepath.Join(root, "examples", "prebound-pv.yaml")
	if out, err := e.run(ctx, "", "kubectl", "apply", "-f", examples); err != nil {
		t.Fatalf("kubectl apply -f examples/prebound-pv.yaml: %v\n%s", err, out)
	}
	if c := e.waitBound(t, ctx, "default", "db-data"); c.Spec.VolumeName != "reserved-for-db" {
		t.Errorf("claim db-data bound to %s, want reserved-for-db", c.Spec.VolumeName)
	}
	for _, args := range [][]string{{"delete", "-f", examples, "--wait"}, {"delete", "-f", filepath.Join(bundle, "tether-production.yaml"), "--wait"}} {
		if out, err := e.run(ctx, "", "kubectl", args...); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	e.eventually(t, ctx, 3*time.Minute, "namespace "+cluster.DeployNamespace+" gone", func(ctx context.Context) (bool, string) {
		_, err := e.client.CoreV1().Namespaces().Get(ctx, cluster.DeployNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	t.Logf("TIMING tether-production.yaml applied, a pre-bound claim bound, removed: %v", since(start))
}

// names lists the DaemonSets' names.
func names(sets []appsv1.DaemonSet) []string {
	var out []string
	for _, s := range sets {
		out = append(out, s.Name)
	}
	return out
}
