package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

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
			return e.capacityOf(ctx, "node-1", "tether-local") > 0 && e.capacityOf(ctx, "node-2", "tether-local") > 0, nil
		})
		if took := time.Since(e.applied); took > 30*time.Second {
			t.Errorf("capacity published %s after deploy/csi was applied: a poll interval (1m), not the registration, brought it", took)
		} else {
			t.Logf("capacity of both nodes published %s after deploy/csi was applied", took.Round(100*time.Millisecond))
		}
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

	t.Run("Delete removes the PV, the backend volume and the data", func(t *testing.T) {
		pv := e.volumeOf(t, getClaim(t, c, "shared"))
		e.deletePods(t, "writer", "reader")
		if err := c.Client.CoreV1().PersistentVolumeClaims("default").Delete(t.Context(), "shared", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		cluster.WaitGone(t, "PV "+pv.Name, func(ctx context.Context) error {
			_, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return err
		})
		if e.onDisk(t, e.nodeOf(pv), pv.Spec.CSI.VolumeHandle) {
			t.Errorf("volume %s is still on the disk of %s", pv.Spec.CSI.VolumeHandle, e.nodeOf(pv))
		}
	})

	t.Run("Retain keeps the PV, the backend volume and the data", func(t *testing.T) {
		e.claim(t, "kept", "tether-local-retain", "100Mi")
		e.runPod(t, "keeper", "", "echo kept > /data/file", "kept")
		pv := e.volumeOf(t, c.WaitClaimBound(t, "default", "kept"))
		e.deletePods(t, "keeper")
		if err := c.Client.CoreV1().PersistentVolumeClaims("default").Delete(t.Context(), "kept", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		c.WaitVolumePhase(t, pv.Name, corev1.VolumeReleased)
		if !e.onDisk(t, e.nodeOf(pv), pv.Spec.CSI.VolumeHandle) {
			t.Errorf("Retain: volume %s is gone from the disk of %s", pv.Spec.CSI.VolumeHandle, e.nodeOf(pv))
		}
	})

	t.Run("a pod with two claims", func(t *testing.T) {
		e.claim(t, "first", "tether-local", "50Mi")
		e.claim(t, "second", "tether-local", "50Mi")
		got := e.podLog(t, e.runPod(t, "two", "", "echo 1 > /data/f && echo 2 > /data2/f && cat /data/f /data2/f", "first", "second"))
		if strings.Fields(got) == nil || strings.Join(strings.Fields(got), ",") != "1,2" {
			t.Errorf("pod read %q", got)
		}
		a, b := e.volumeOf(t, getClaim(t, c, "first")), e.volumeOf(t, getClaim(t, c, "second"))
		if a.Name == b.Name || e.nodeOf(a) != e.nodeOf(b) {
			t.Errorf("volumes %s on %s and %s on %s", a.Name, e.nodeOf(a), b.Name, e.nodeOf(b))
		}
		e.deletePods(t, "two")
	})

	t.Run("WaitForFirstConsumer lands where capacity is", func(t *testing.T) {
		// 70 of node-1's 100Gi taken: a 60Gi claim fits on node-2 only.
		e.claim(t, "big-1", "tether-local", "70Gi")
		e.runPod(t, "big-1", "node-1", "true", "big-1")
		cluster.Eventually(t, "node-1's capacity published below 60Gi", func(ctx context.Context) (bool, error) {
			return e.capacityOf(ctx, "node-1", "tether-local") < 60<<30, nil
		})
		e.claim(t, "big-2", "tether-local", "60Gi")
		e.runPod(t, "big-2", "", "true", "big-2")
		if got := e.nodeOf(e.volumeOf(t, getClaim(t, c, "big-2"))); got != "node-2" {
			t.Errorf("the 60Gi volume is on %s, where it does not fit", got)
		}
		e.deletePods(t, "big-1", "big-2")
	})

	t.Run("every example", func(t *testing.T) {
		for _, f := range []string{"claim-immediate.yaml", "claim-and-pod.yaml", "static-local-pv.yaml", "prebound-pv.yaml", "claim-with-volumename.yaml"} {
			e.apply(t, f)
		}
		for _, claim := range []string{"scratch", "web-data", "static-data", "db-data", "archive"} {
			c.WaitClaimBound(t, "default", claim)
		}
		for _, p := range []string{"web", "static-app"} {
			e.waitRunning(t, p)
		}
		pv := e.volumeOf(t, getClaim(t, c, "web-data"))
		// web appends the date to /data/log, on its node's disk.
		cluster.Eventually(t, "web's log on the disk", func(context.Context) (bool, error) {
			return e.onDiskFile(e.nodeOf(pv), pv.Spec.CSI.VolumeHandle, "log"), nil
		})
		if node := e.podNode(t, "static-app"); node != "node-1" {
			t.Errorf("static-app on %s, its disk is on node-1", node)
		}
	})

	t.Run("the driver and provisioner restart without losing a volume", func(t *testing.T) {
		pv := e.volumeOf(t, getClaim(t, c, "web-data"))
		node := e.nodeOf(pv)
		old := e.driverPod(t, node)
		if err := c.Client.CoreV1().Pods(namespace).Delete(t.Context(), old.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		cluster.WaitGone(t, "pod "+old.Name, func(ctx context.Context) error {
			_, err := c.Client.CoreV1().Pods(namespace).Get(ctx, old.Name, metav1.GetOptions{})
			return err
		})
		e.waitDeployed(t)
		if got := e.volumeOf(t, getClaim(t, c, "web-data")); got.Name != pv.Name || got.Status.Phase != corev1.VolumeBound {
			t.Errorf("after the restart web-data has %s (%s), had %s", got.Name, got.Status.Phase, pv.Name)
		}
		if !e.onDisk(t, node, pv.Spec.CSI.VolumeHandle) {
			t.Errorf("volume %s lost on %s", pv.Spec.CSI.VolumeHandle, node)
		}
		// The restarted driver serves a new pod of the same volume, and new claims.
		e.deletePods(t, "web")
		if got := e.podLog(t, e.runPod(t, "web-reader", node, "test -s /data/log && echo has-log", "web-data")); !strings.Contains(got, "has-log") {
			t.Errorf("web-reader: %q", got)
		}
		e.claim(t, "after-restart", "tether-local", "10Mi")
		e.runPod(t, "after-restart", node, "true", "after-restart")
	})

	t.Run("the provisioner killed mid-CreateVolume, the claim deleted: nothing leaks", func(t *testing.T) {
		// A slow backend (the driver answers CreateVolume 8 s after making
		// the volume) leaves room to kill the provisioner in between.
		e.setDriverArgs(t, "--slow-create=8s")
		defer e.setDriverArgs(t)
		n := e.nodes["node-2"]
		before := e.diskVolumes(t, "node-2")
		e.claim(t, "orphan", "tether-local", "10Mi")
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default"}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": "node-2"}, TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers: []corev1.Container{{Name: "c", Image: cluster.BusyboxImage, Command: []string{"sleep", "3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "orphan"}}}}}}
		if _, err := c.Client.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cluster.Eventually(t, "the volume made on node-2's disk, CreateVolume not yet answered", func(context.Context) (bool, error) {
			return len(e.diskVolumes(t, "node-2")) > len(before), nil
		})
		pids := n.Processes("--node-deployment")
		if len(pids) == 0 {
			t.Fatal("no provisioner process on node-2")
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Logf("killed the provisioner on node-2 (pids %v) mid-CreateVolume", pids)
		e.deletePods(t, "orphan")
		if err := c.Client.CoreV1().PersistentVolumeClaims("default").Delete(t.Context(), "orphan", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		cluster.WaitGone(t, "claim orphan", func(ctx context.Context) error {
			_, err := c.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "orphan", metav1.GetOptions{})
			return err
		})
		cluster.Eventually(t, "node-2's disk holds exactly the volumes of its PVs", func(ctx context.Context) (bool, error) {
			pvs, err := c.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			want := map[string]bool{}
			for _, pv := range pvs.Items {
				if pv.Spec.CSI != nil && cluster.PVNode(&pv) == "node-2" {
					want[pv.Spec.CSI.VolumeHandle] = true
				}
			}
			got := e.diskVolumes(t, "node-2")
			if len(got) != len(want) {
				return false, nil
			}
			for _, id := range got {
				if !want[id] {
					return false, nil
				}
			}
			return true, nil
		})
	})

	t.Run("deleting the binder leader pod hands over, no double binding", func(t *testing.T) {
		leader := e.binderLeaderPod(t)
		if err := c.Client.CoreV1().Pods(namespace).Delete(t.Context(), leader, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		e.claim(t, "after-failover", "tether-local-immediate", "10Mi")
		c.WaitClaimBound(t, "default", "after-failover")
		t.Logf("a claim bound %s after the leader pod %s was deleted", time.Since(start).Round(100*time.Millisecond), leader)
		e.checkNoDoubleBinding(t)
	})
}

// setDriverArgs sets the DaemonSet's driver arguments to the shipped ones
// plus extra, and waits for the new pods.
func (e *realEnv) setDriverArgs(t *testing.T, extra ...string) {
	t.Helper()
	dss := e.c.Client.AppsV1().DaemonSets(namespace)
	var gen int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := dss.Get(t.Context(), "tether-local", metav1.GetOptions{})
		if err != nil {
			return err
		}
		i := slices.IndexFunc(ds.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "driver" })
		if i < 0 {
			t.Fatal("no driver container in tether-local")
		}
		driver := &ds.Spec.Template.Spec.Containers[i]
		driver.Args = append(slices.DeleteFunc(driver.Args, func(a string) bool { return strings.HasPrefix(a, "--slow-create") }), extra...)
		ds, err = dss.Update(t.Context(), ds, metav1.UpdateOptions{})
		if err == nil {
			gen = ds.Generation
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "tether-local rolled out", func(ctx context.Context) (bool, error) {
		ds, err := dss.Get(ctx, "tether-local", metav1.GetOptions{})
		return err == nil && ds.Status.ObservedGeneration >= gen && ds.Status.UpdatedNumberScheduled == 2 &&
			ds.Status.NumberReady == 2 && ds.Status.NumberUnavailable == 0, nil
	})
	e.waitDeployed(t)
}

// diskVolumes lists the volumes the local driver keeps on a node's disk.
func (e *realEnv) diskVolumes(t *testing.T, node string) []string {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(e.nodes[node].Data, "volumes"))
	var ids []string
	for _, d := range entries {
		if id, ok := strings.CutSuffix(d.Name(), ".json"); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// binderLeaderPod is the name of the binder pod that holds the Lease (its
// identity is the pod's host name plus a suffix).
func (e *realEnv) binderLeaderPod(t *testing.T) string {
	t.Helper()
	name, _, _ := strings.Cut(binderLeaseHolder(t, e.c), "_")
	return name
}

// capacityOf is the capacity published for a node and class (-1: none).
func (e *realEnv) capacityOf(ctx context.Context, node, class string) int64 {
	list, err := e.c.Client.StorageV1().CSIStorageCapacities(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return -1
	}
	for _, o := range list.Items {
		if o.StorageClassName == class && o.NodeTopology != nil && o.NodeTopology.MatchLabels[cluster.LocalKey] == node && o.Capacity != nil {
			return o.Capacity.Value()
		}
	}
	return -1
}

// onDisk reports whether the local driver on a node keeps a volume: its
// record <root>/volumes/<id>.json or its folder, on the node's disk.
func (e *realEnv) onDisk(t *testing.T, node, id string) bool {
	t.Helper()
	n, ok := e.nodes[node]
	if !ok {
		t.Fatalf("no node %q", node)
	}
	for _, p := range []string{id + ".json", id} {
		if _, err := os.Stat(filepath.Join(n.Data, "volumes", p)); err == nil {
			return true
		}
	}
	return false
}

// onDiskFile reports whether a volume's folder on a node holds a file.
func (e *realEnv) onDiskFile(node, id, name string) bool {
	n, ok := e.nodes[node]
	if !ok {
		return false
	}
	found := false
	_ = filepath.WalkDir(filepath.Join(n.Data, "volumes", id), func(path string, d os.DirEntry, err error) error {
		found = found || (err == nil && d.Name() == name)
		return nil
	})
	return found
}

func (e *realEnv) waitRunning(t *testing.T, name string) {
	t.Helper()
	cluster.Eventually(t, "pod "+name+" Running", func(ctx context.Context) (bool, error) {
		p, err := e.c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
}

func (e *realEnv) podNode(t *testing.T, name string) string {
	t.Helper()
	p, err := e.c.Client.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Spec.NodeName
}

// deletePods deletes pods and waits until kubelet has let them go (their
// volumes unmounted).
func (e *realEnv) deletePods(t *testing.T, names ...string) {
	t.Helper()
	pods := e.c.Client.CoreV1().Pods("default")
	for _, name := range names {
		if err := pods.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		cluster.WaitGone(t, "pod "+name, func(ctx context.Context) error {
			_, err := pods.Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
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
