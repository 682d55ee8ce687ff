package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// snapshotterImage is the csi-snapshotter of the tools cache, packed
// locally (the upstream image cannot be fetched here).
const snapshotterImage = "localhost/csi-snapshotter:e2e"

// TestRealNodeRestore runs deploy/csi with its snapshots component on a
// real kubelet node, beside the snapshot-controller: a pod writes into a
// claim, the claim is snapshotted, the pod's file is changed, and a pod
// reads the file from a claim restored from the snapshot.
func TestRealNodeRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and a kubelet node")
	}
	cluster.CheckRealNodeHost(t)
	start := time.Now()
	c := cluster.Start(t, cluster.Options{RealNodes: true, Scheduler: true,
		Controllers: []string{"*", "-persistentvolume-binder-controller"}})
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.Tool("csi-snapshotter")
	if err != nil {
		t.Fatal(err)
	}
	images := append(cluster.NodeImages(t), cluster.Image{Ref: snapshotterImage, Files: map[string]string{"app": bin}, Entrypoint: []string{"/app"}})
	e := &realEnv{env: env{c: c, root: root}, nodes: map[string]*cluster.RealNode{"node-1": c.StartRealNode(t, "node-1", images)}}
	// The CRDs before deploy/csi: the provisioner looks for the API at start.
	c.StartSnapshotController(t, "--enable-distributed-snapshotting")

	// deploy/csi/snapshots as shipped, its sidecar's image swapped.
	component := filepath.Join(root, "deploy", "csi", "snapshots")
	patch, err := os.ReadFile(filepath.Join(component, "snapshotter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	patch = []byte(strings.Replace(string(patch), "image: csi-snapshotter", "image: "+snapshotterImage, 1))
	// As DeployCSI does for the provisioner: the API server's address (no
	// kube-proxy serves the kubernetes Service here).
	api, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	patch = []byte(strings.Replace(string(patch), "          env:\n", fmt.Sprintf(
		"          env:\n            - {name: KUBERNETES_SERVICE_HOST, value: %q}\n            - {name: KUBERNETES_SERVICE_PORT, value: %q}\n",
		api.Hostname(), api.Port()), 1))
	c.DeployCSI(t, []string{"node-1"}, string(patch))
	c.Kubectl(t, nil, "apply", "-f", filepath.Join(component, "rbac-snapshotter.yaml"), "-f", filepath.Join(component, "snapshotclass.yaml"))
	t.Logf("control plane, node and deploy/csi with snapshots running in %s", time.Since(start).Round(time.Second))
	e.apply(t, "storageclass-local.yaml")

	e.claim(t, "orig", "tether-local", "100Mi")
	e.runPod(t, "writer", "", "echo before-snapshot > /data/file && sync", "orig")
	c.WaitClaimBound(t, "default", "orig")

	sc, err := snapclientset.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	class, source := "tether-local", "orig"
	if _, err := sc.SnapshotV1().VolumeSnapshots("default").Create(t.Context(), &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: "default"},
		Spec:       snapv1.VolumeSnapshotSpec{VolumeSnapshotClassName: &class, Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &source}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "snapshot ready", func(ctx context.Context) (bool, error) {
		s, err := sc.SnapshotV1().VolumeSnapshots("default").Get(ctx, "snap", metav1.GetOptions{})
		return err == nil && s.Status != nil && s.Status.ReadyToUse != nil && *s.Status.ReadyToUse, nil
	})
	e.runPod(t, "overwriter", "node-1", "echo after-snapshot > /data/file && sync", "orig")

	group := snapv1.GroupName
	restored := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "restored", Namespace: "default"},
		Spec: *getClaim(t, c, "orig").Spec.DeepCopy()}
	restored.Spec.VolumeName = ""
	restored.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "snap"}
	restored.Spec.DataSourceRef = nil
	if _, err := c.Client.CoreV1().PersistentVolumeClaims("default").Create(t.Context(), restored, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(e.podLog(t, e.runPod(t, "reader", "node-1", "cat /data/file", "restored"))); got != "before-snapshot" {
		t.Errorf("the restored claim holds %q, want the snapshot's before-snapshot", got)
	}
	if got := strings.TrimSpace(e.podLog(t, e.runPod(t, "reader-orig", "node-1", "cat /data/file", "orig"))); got != "after-snapshot" {
		t.Errorf("the original claim holds %q", got)
	}
	t.Logf("real-node restore: %s in all", time.Since(start).Round(time.Second))
}
