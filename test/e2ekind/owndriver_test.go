package e2ekind

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// ownHarness is all the kind cluster adds over docs/own-driver.md's
// recipe: tether's images at the bundle's version, which the nodes hold
// from the load run (the recipe's tree names the release it becomes).
const ownHarness = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../own]
images:
  - {name: ghcr.io/tether-csi/provisioner, newTag: %[1]s}
  - {name: ghcr.io/tether-csi/binder, newTag: %[1]s}
`

// ownDriver runs "Use with your own driver": the csi-test mock driver in
// EP v6.4.0's layout, switched to tether with deploy/components; a claim
// of its class is provisioned by tether's provisioner in the driver's pod,
// bound by tether's binder, deleted (the driver logs the DeleteVolume);
// then the switch back to EP and KCM's binder (handBack), and the recipe
// removed.
func (e *env) ownDriver(t *testing.T, ctx context.Context, bundle string) {
	start := time.Now()
	dir := t.TempDir()
	cluster.WriteOwnDriverTree(t, dir, fmt.Sprintf(ownHarness, bundleVersion))
	harness := filepath.Join(dir, "harness")
	if out, err := e.run(ctx, "", "kubectl", "apply", "-k", harness); err != nil {
		t.Fatalf("kubectl apply -k (the own-driver recipe): %v\n%s", err, out)
	}
	apps := e.client.AppsV1()
	e.eventually(t, ctx, 4*time.Minute, "the driver's controller and the binder ready", func(ctx context.Context) (bool, string) {
		for _, d := range []struct{ ns, name string }{{cluster.OwnDriverNamespace, cluster.OwnDriverDeploy}, {cluster.DeployNamespace, "tether-binder"}} {
			got, err := apps.Deployments(d.ns).Get(ctx, d.name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if got.Status.ReadyReplicas != *got.Spec.Replicas {
				return false, fmt.Sprintf("%s/%s %d/%d ready", d.ns, d.name, got.Status.ReadyReplicas, *got.Spec.Replicas)
			}
		}
		return true, ""
	})
	pods, err := e.client.CoreV1().Pods(cluster.OwnDriverNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + cluster.OwnDriverDeploy})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the driver's pod: %v", err)
	}
	pod := pods.Items[0]
	for _, c := range pod.Spec.Containers {
		if c.Name == "csi-provisioner" && !strings.Contains(c.Image, "tether-csi/provisioner:"+bundleVersion) {
			t.Fatalf("the driver's csi-provisioner container runs %s, not tether's provisioner", c.Image)
		}
	}

	pvcs := e.client.CoreV1().PersistentVolumeClaims("default")
	if _, err := pvcs.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "own"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr(cluster.OwnDriverClass), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pv := e.volumeOf(t, ctx, "default", "own")
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != cluster.OwnDriverName {
		t.Fatalf("PV %s is not the mock driver's: %+v", pv.Name, pv.Spec.CSI)
	}
	if err := pvcs.Delete(ctx, "own", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually(t, ctx, 2*time.Minute, "PV "+pv.Name+" deleted", func(ctx context.Context) (bool, string) {
		_, err := e.client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	e.eventually(t, ctx, time.Minute, "the mock driver logs DeleteVolume of "+pv.Spec.CSI.VolumeHandle, func(ctx context.Context) (bool, string) {
		b, err := e.client.CoreV1().Pods(cluster.OwnDriverNamespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "mock-driver"}).DoRaw(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "/csi.v1.Controller/DeleteVolume") && strings.Contains(line, pv.Spec.CSI.VolumeHandle) {
				return true, ""
			}
		}
		return false, "no such call in its log"
	})
	e.handBack(t, ctx, bundle)
	if out, err := e.run(ctx, "", "kubectl", "delete", "-k", harness, "--wait"); err != nil {
		t.Fatalf("kubectl delete -k (the own-driver recipe): %v\n%s", err, out)
	}
	for _, ns := range []string{cluster.OwnDriverNamespace, cluster.DeployNamespace} {
		e.eventually(t, ctx, 3*time.Minute, "namespace "+ns+" gone", func(ctx context.Context) (bool, string) {
			_, err := e.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	t.Logf("TIMING own-driver recipe (mock driver in EP's layout, switched by deploy/components; provisioned, bound, deleted, removed): %v", since(start))
}
