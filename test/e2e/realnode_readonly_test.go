package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// TestRealNodeReadOnlyPublish shows on a real kubelet what makes a pod's
// mount of a CSI volume read-only, the fact docs/provisioner.md states for
// --controller-publish-readonly. The PV's csi.readOnly, the field the flag
// sets, is for an attacher's ControllerPublishVolume: kubelet does not pass
// it to NodePublishVolume, so a pod that does not ask for readOnly writes.
// A pod whose claim volume is readOnly gets a NodePublishVolume with
// readonly, which the example local driver honours where it counts: the
// published mount is read-only in the node's (kubelet's) mount namespace,
// not only in the driver's, and the pod's write fails with EROFS.
//
// The local driver refuses ReadOnlyMany (a local volume serves one node),
// so the PV here is a static one, ReadWriteOnce with csi.readOnly, over a
// volume tether provisioned.
func TestRealNodeReadOnlyPublish(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and a kubelet node")
	}
	start := time.Now()
	e := startReal(t)
	c := e.c
	node := c.StartRealNode(t, "node-1", append(cluster.NodeImages(t), cluster.UpstreamImages(t)...)) // EP's, for the switch back
	e.nodes[node.Name] = node
	c.DeployCSI(t, []string{node.Name})
	e.apply(t, "storageclass-local.yaml")
	t.Logf("control plane, node and deploy/csi running in %s", time.Since(start).Round(time.Second))

	// A volume on node-1, kept (Retain) once its claim and PV are gone.
	e.claim(t, "src", "tether-local-retain", "100Mi")
	e.runPod(t, "seed", node.Name, "echo seeded > /data/file", "src")
	src := e.volumeOf(t, c.WaitClaimBound(t, "default", "src"))
	e.deletePods(t, "seed")
	if err := c.Client.CoreV1().PersistentVolumeClaims("default").Delete(t.Context(), "src", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitVolumePhase(t, src.Name, corev1.VolumeReleased)
	if err := c.Client.CoreV1().PersistentVolumes().Delete(t.Context(), src.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The same volume as a static PV with csi.readOnly, pre-bound to "ro".
	csiSrc := src.Spec.CSI.DeepCopy()
	csiSrc.ReadOnly = true
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "ro-static"}, Spec: corev1.PersistentVolumeSpec{
		Capacity: src.Spec.Capacity, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain, NodeAffinity: src.Spec.NodeAffinity,
		ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: "ro"},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: csiSrc}}}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	none := ""
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "ro", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{
		StorageClassName: &none, VolumeName: pv.Name, AccessModes: pv.Spec.AccessModes,
		Resources: corev1.VolumeResourceRequirements{Requests: src.Spec.Capacity}}}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims("default").Create(t.Context(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitClaimBound(t, "default", "ro")

	const script = `cat /data/file; if touch /data/x; then echo WRITE-OK; fi; echo DONE; sleep 3600`
	t.Run("csi.readOnly alone: kubelet publishes read-write, the pod writes", func(t *testing.T) {
		log, publish := e.holdPod(t, node, "plain", pv.Name, false, script)
		if !strings.Contains(log, "seeded") || !strings.Contains(log, "WRITE-OK") {
			t.Errorf("pod log %q: want the seeded file read and the write done", log)
		}
		if !strings.HasPrefix(publish, "rw") {
			t.Errorf("published mount options %q, want rw", publish)
		}
		e.deletePods(t, "plain")
	})
	t.Run("the pod's readOnly: the driver publishes read-only, the write fails", func(t *testing.T) {
		log, publish := e.holdPod(t, node, "reader", pv.Name, true, script)
		if !strings.Contains(log, "seeded") || strings.Contains(log, "WRITE-OK") || !strings.Contains(log, "Read-only file system") {
			t.Errorf("pod log %q: want the seeded file read and the write refused as read-only", log)
		}
		if !strings.HasPrefix(publish, "ro") {
			t.Errorf("published mount options %q, want ro (the driver's NodePublishVolume with readonly)", publish)
		}
		e.deletePods(t, "reader")
	})
	// The switch back to EP in node mode, with the in-cluster hand-back.
	handBackNodeMode(t, e)
	t.Logf("real-node read-only publish and node-mode hand-back: %s in all", time.Since(start).Round(time.Second))
}

// holdPod runs a busybox pod on node with claim "ro" at /data (the claim
// volume readOnly or not), waits until its log says DONE, and returns the
// log and the options of the volume's NodePublishVolume mount on the node
// (the target kubelet gave the driver: .../pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount).
func (e *realEnv) holdPod(t *testing.T, node *cluster.RealNode, name, pvName string, readOnly bool, script string) (string, string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
		NodeName: node.Name, RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr(int64(1)),
		Containers: []corev1.Container{{Name: "c", Image: cluster.BusyboxImage, Command: []string{"sh", "-c", script},
			VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/data"}}}},
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ro", ReadOnly: readOnly}}}}}}
	created, err := e.c.Client.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var log string
	cluster.Eventually(t, "pod "+name+" done", func(ctx context.Context) (bool, error) {
		got, err := e.c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || got.Status.Phase != corev1.PodRunning {
			if err == nil && got.Status.Phase == corev1.PodFailed {
				t.Fatalf("pod %s failed: %s", name, e.podLog(t, name))
			}
			return false, nil
		}
		data, err := e.c.Client.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		log = string(data)
		return err == nil && strings.Contains(log, "DONE"), nil
	})
	mounts, err := node.Exec(t.Context(), "cat", "/proc/self/mounts")
	if err != nil {
		t.Fatalf("the node's mounts: %v: %s", err, mounts)
	}
	target := string(created.UID) + "/volumes/kubernetes.io~csi/" + pvName + "/mount"
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) >= 4 && strings.HasSuffix(f[1], target) {
			t.Logf("pod %s (claim readOnly %v): %s; published at %s with %s", name, readOnly, strings.Join(strings.Fields(log), " "), f[1], f[3])
			return log, f[3]
		}
	}
	t.Fatalf("no mount on the node ends with %s", target)
	return "", ""
}
