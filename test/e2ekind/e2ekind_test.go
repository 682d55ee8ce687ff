package e2ekind

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
	"github.com/tether-csi/tether/test/kind"
)

// TestKind installs tether on a kind cluster from a `make release` bundle
// twice, by the README's two recipes: the archives loaded into the nodes
// (then every scenario), and the images pushed to a registry on loopback
// (then a volume written and read back), then the load recipe again after
// docs/deploy.md's step between them. Between the first two,
// tether-production.yaml and the "Use with your own driver" recipe (with
// the switch back) run.
func TestKind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Minute)
	defer cancel()
	if os := kindEnabled(); !os {
		t.Skip("makes a kind cluster: run make e2e-kind (TETHER_KIND=1)")
	}
	root, err := kind.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bundle := makeRelease(t, ctx, root)
	e := upCluster(t, ctx)
	e.loadStandIns(t, ctx, bundle)

	t.Run("load", func(t *testing.T) {
		e.runReadme(t, ctx, root, bundle, readmeLoad)
		e.waitTether(t, ctx)
		e.examples(t, ctx, root)
		e.statefulSet(t, ctx)
		e.deleteAll(t, ctx)
		e.uninstall(t, ctx, bundle, "tether.yaml")
	})
	t.Run("production", func(t *testing.T) { e.production(t, ctx, root, bundle) })
	t.Run("own-driver", func(t *testing.T) { e.ownDriver(t, ctx, bundle) })
	t.Run("push", func(t *testing.T) {
		reg, err := kind.StartRegistry(ctx, e.d, kind.RegistryOptions{Network: "kind"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Remove(context.Background()) })
		if err := reg.ConfigureNodes(ctx, e.nodes...); err != nil {
			t.Fatal(err)
		}
		e.runReadme(t, ctx, root, bundle, readmePush)
		e.waitTether(t, ctx)
		e.checkPulledFrom(t, ctx, pushRegistry)
		e.writeRead(t, ctx, "pushed")
		e.deleteAll(t, ctx)
	})
	// From the push recipe back to the load recipe: the nodes' kubelets
	// pull again what they pulled under the registry's names, until
	// docs/deploy.md's step makes them forget those pulls.
	t.Run("push-to-load", func(t *testing.T) {
		e.runReadme(t, ctx, root, bundle, readmeLoad)
		e.waitPullRefused(t, ctx, "ghcr.io/tether-csi/")
		e.runBlock(t, ctx, root, bundle, "docs/deploy.md", deployMove)
		e.waitTether(t, ctx)
		e.writeRead(t, ctx, "moved")
		e.deleteAll(t, ctx)
	})
}

// waitPullRefused waits until a pod of tether's waits for an image named
// by prefix that its node tried to pull and could not (ErrImagePull or
// ImagePullBackOff).
func (e *env) waitPullRefused(t *testing.T, ctx context.Context, prefix string) {
	t.Helper()
	e.eventually(t, ctx, 3*time.Minute, "a tether pod's pull of "+prefix+"... refused", func(ctx context.Context) (bool, string) {
		pods, err := e.client.CoreV1().Pods(cluster.DeployNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.ContainerStatuses {
				if w := c.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") && strings.HasPrefix(c.Image, prefix) {
					t.Logf("pod %s container %s: %s: %s", p.Name, c.Name, w.Reason, w.Message)
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d pods, none refused a pull", len(pods.Items))
	})
}

// examples applies examples/ as a user would and checks each claim binds:
// WaitForFirstConsumer (web-data, with its pod), Immediate (scratch), a
// static PV pre-bound to its claim (db-data) and a claim naming its PV
// (archive). What the pod wrote, a second pod on the same node reads.
func (e *env) examples(t *testing.T, ctx context.Context, root string) {
	start := time.Now()
	for _, f := range []string{"storageclass-local.yaml", "claim-immediate.yaml", "prebound-pv.yaml", "claim-with-volumename.yaml", "claim-and-pod.yaml"} {
		if out, err := e.run(ctx, "", "kubectl", "apply", "-f", filepath.Join(root, "examples", f)); err != nil {
			t.Fatalf("kubectl apply -f examples/%s: %v\n%s", f, err, out)
		}
	}
	for claim, pv := range map[string]string{"scratch": "", "db-data": "reserved-for-db", "archive": "archive-volume", "web-data": ""} {
		c := e.waitBound(t, ctx, "default", claim)
		if pv != "" && c.Spec.VolumeName != pv {
			t.Errorf("claim %s bound to %s, want %s", claim, c.Spec.VolumeName, pv)
		}
	}
	node := e.waitPod(t, ctx, "default", "web", corev1.PodRunning)
	pv := e.volumeOf(t, ctx, "default", "web-data")
	if got := pinnedNode(pv); got != node {
		t.Errorf("web-data's PV %s is pinned to %q, its pod runs on %q", pv.Name, got, node)
	}
	e.readBack(t, ctx, "web-reader", "web-data", "cat /data/log", "")
	t.Logf("TIMING examples (4 claims bound, a pod wrote and another read back on %s): %v", node, since(start))
}

// statefulSet scales a StatefulSet of WaitForFirstConsumer claims up to
// 3, down to 1 and up to 3 again: the replicas made again find what the
// first ones wrote.
func (e *env) statefulSet(t *testing.T, ctx context.Context) {
	start := time.Now()
	sets := e.client.AppsV1().StatefulSets("default")
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr[int32](3), ServiceName: "db",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr[int64](1), Containers: []corev1.Container{{
					Name: "db", Image: cluster.ExamplesBusyboxImage,
					Command:      []string{"sh", "-c", `if [ -f /data/id ]; then echo "found $(cat /data/id)"; else echo "$HOSTNAME" > /data/id; echo new; fi; exec sleep 3600`},
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					StorageClassName: ptr("tether-local"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
	if _, err := sets.Create(ctx, ss, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scale := func(n int32) {
		s, err := sets.GetScale(ctx, "db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Replicas = n
		if _, err := sets.UpdateScale(ctx, "db", s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.eventually(t, ctx, 4*time.Minute, fmt.Sprintf("StatefulSet db at %d ready replicas", n), func(ctx context.Context) (bool, string) {
			got, err := sets.Get(ctx, "db", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			pods, err := e.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=db"})
			if err != nil {
				return false, err.Error()
			}
			state := fmt.Sprintf("%d ready, %d pods", got.Status.ReadyReplicas, len(pods.Items))
			return got.Status.ReadyReplicas == n && len(pods.Items) == int(n), state
		})
	}
	scale(3)
	for i := 0; i < 3; i++ {
		e.waitLog(t, ctx, fmt.Sprintf("db-%d", i), "new")
	}
	scale(1)
	scale(3)
	// db-1 and db-2 are new pods on their old claims.
	e.waitLog(t, ctx, "db-1", "found db-1")
	e.waitLog(t, ctx, "db-2", "found db-2")
	t.Logf("TIMING StatefulSet 3 -> 1 -> 3 replicas, the new pods finding their data again: %v", since(start))
}

// writeRead writes through a new WaitForFirstConsumer claim and reads back.
func (e *env) writeRead(t *testing.T, ctx context.Context, name string) {
	start := time.Now()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr("tether-local"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := e.client.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.readBack(t, ctx, name+"-writer", name, "echo "+name+" > /data/f && cat /data/f", name)
	e.readBack(t, ctx, name+"-reader", name, "cat /data/f", name)
	t.Logf("TIMING a claim written and read back: %v", since(start))
}

// deleteAll deletes every pod, StatefulSet, claim and PV the scenarios
// made, and checks that each volume tether provisioned is gone from the
// driver's folder on its node.
func (e *env) deleteAll(t *testing.T, ctx context.Context) {
	start := time.Now()
	pvs, err := e.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"delete", "statefulset", "--all", "--wait"}, {"delete", "pod", "--all", "--wait", "--grace-period=1"},
		{"delete", "pvc", "--all", "--wait"},
	} {
		if out, err := e.run(ctx, "", "kubectl", args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var ours []corev1.PersistentVolume
	for _, pv := range pvs.Items {
		if pv.Spec.CSI != nil {
			ours = append(ours, pv)
			continue
		}
		// The examples' static PVs are Retain: an admin deletes them.
		if err := e.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	e.eventually(t, ctx, 3*time.Minute, "every PV deleted", func(ctx context.Context) (bool, string) {
		left, err := e.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(left.Items) == 0, fmt.Sprintf("%d PVs left", len(left.Items))
	})
	for _, pv := range ours {
		node := pinnedNode(&pv)
		out, err := e.d.Docker(ctx, "exec", node, "ls", "-A", "/var/lib/tether-local")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, pv.Spec.CSI.VolumeHandle) {
			t.Errorf("volume %s (PV %s) is still on %s: %s", pv.Spec.CSI.VolumeHandle, pv.Name, node, out)
		}
	}
	t.Logf("TIMING deletion (%d provisioned volumes gone from their nodes): %v", len(ours), since(start))
}

// uninstall deletes what the README applied and waits for its namespace
// to go.
func (e *env) uninstall(t *testing.T, ctx context.Context, bundle, manifests string) {
	start := time.Now()
	if out, err := e.run(ctx, bundle, "kubectl", "delete", "-f", manifests, "--wait"); err != nil {
		t.Fatalf("kubectl delete -f %s: %v\n%s", manifests, err, out)
	}
	e.eventually(t, ctx, 3*time.Minute, "namespace "+cluster.DeployNamespace+" gone", func(ctx context.Context) (bool, string) {
		_, err := e.client.CoreV1().Namespaces().Get(ctx, cluster.DeployNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	t.Logf("TIMING uninstall: %v", since(start))
}

// checkPulledFrom checks that tether's pods run images named in registry.
func (e *env) checkPulledFrom(t *testing.T, ctx context.Context, registry string) {
	pods, err := e.client.CoreV1().Pods(cluster.DeployNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if strings.Contains(c.Image, "/tether") || strings.Contains(c.Image, "tether-csi") {
				n++
				if !strings.HasPrefix(c.Image, registry+"/") {
					t.Errorf("pod %s container %s runs %s, not from %s", p.Name, c.Name, c.Image, registry)
				}
			}
		}
	}
	if n == 0 {
		t.Errorf("no tether container found in %s", cluster.DeployNamespace)
	}
}
