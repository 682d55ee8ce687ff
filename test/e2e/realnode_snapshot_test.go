package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// TestRealNodeRestore runs deploy/csi with its snapshots component on a
// real kubelet node, beside the snapshot-controller: a pod writes into a
// claim, the claim is snapshotted, the pod's file is changed, and a pod
// reads the file from a claim restored from the snapshot.
func TestRealNodeRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and a kubelet node")
	}
	start := time.Now()
	e := startReal(t)
	c := e.c
	e.nodes["node-1"] = c.StartRealNode(t, "node-1", append(cluster.NodeImages(t), cluster.SnapshotterNodeImage(t)))
	// deploy/csi/snapshots as shipped, but for its sidecar's image and the
	// API server's address.
	c.DeployCSI(t, []string{"node-1"}, c.SnapshotsComponent(t))
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
