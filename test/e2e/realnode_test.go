package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// TestRealNodes runs deploy/csi as pods on two real kubelet nodes and
// writes and reads data through tether's volumes.
func TestRealNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and two kubelet nodes")
	}
	start := time.Now()
	e := setUpReal(t)
	defer func() { t.Logf("real-node e2e: %s in all", time.Since(start).Round(time.Second)) }()
	c := e.c
	e.apply(t, "storageclass-local.yaml")

	t.Run("capacity published for both nodes", func(t *testing.T) {
		// The provisioners started before kubelet registered the driver:
		// without the CSINode reaction this waits a whole poll (1 minute).
		cluster.Eventually(t, "a CSIStorageCapacity per node and class", func(ctx context.Context) (bool, error) {
			list, err := c.Client.StorageV1().CSIStorageCapacities(namespace).List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) >= 4, nil // 2 WaitForFirstConsumer classes on 2 nodes
		})
	})

	t.Run("a pod writes, a second pod reads; the data is on the node's disk", func(t *testing.T) {
		e.claim(t, "shared", "tether-local", "100Mi")
		e.runPod(t, "writer", "", "echo written-by-writer > /data/file && sync", "shared")
		pv := e.volumeOf(t, c.WaitClaimBound(t, "default", "shared"))
		node := e.nodeOf(pv)
		if got := e.podLog(t, e.runPod(t, "reader", node, "cat /data/file", "shared")); strings.TrimSpace(got) != "written-by-writer" {
			t.Errorf("reader read %q", got)
		}
		n := e.nodes[node]
		found := false
		_ = filepath.WalkDir(n.Data, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "file" {
				data, _ := os.ReadFile(path)
				found = found || strings.TrimSpace(string(data)) == "written-by-writer"
			}
			return nil
		})
		if !found {
			t.Errorf("no file with the data under %s, the disk of %s", n.Data, node)
		}
	})
}

// claim creates a claim.
func (e *realEnv) claim(t *testing.T, name, class, size string) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	if _, err := e.c.Client.CoreV1().PersistentVolumeClaims("default").Create(t.Context(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runPod runs a busybox pod with the claims mounted at /data, /data2…
// (on node, if not ""), waits for it to succeed and returns its name.
func (e *realEnv) runPod(t *testing.T, name, node, script string, claims ...string) string {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr(int64(1)),
		Containers: []corev1.Container{{Name: "c", Image: cluster.BusyboxImage, Command: []string{"sh", "-c", script}}}}}
	if node != "" {
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	}
	for i, claim := range claims {
		vol := "v" + string(rune('0'+i))
		mount := "/data"
		if i > 0 {
			mount += string(rune('1' + i))
		}
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: mount})
	}
	pods := e.c.Client.CoreV1().Pods("default")
	if _, err := pods.Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "pod "+name+" Succeeded", func(ctx context.Context) (bool, error) {
		got, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err == nil && got.Status.Phase == corev1.PodFailed {
			t.Fatalf("pod %s failed: %s", name, e.podLog(t, name))
		}
		return err == nil && got.Status.Phase == corev1.PodSucceeded, nil
	})
	return name
}

// podLog is a pod's log, through kubelet.
func (e *realEnv) podLog(t *testing.T, name string) string {
	t.Helper()
	data, err := e.c.Client.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("log of %s: %v", name, err)
	}
	return string(data)
}
