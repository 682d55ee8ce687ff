package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/tether-csi/tether/pkg/nodeloss"
	"github.com/tether-csi/tether/test/cluster"
)

// lossGrace is the binder's --node-loss-grace here: the pod GC removes the
// pods of a deleted Node 40 to 80 s after its deletion, so a shorter grace
// would not shorten the deleted-Node case.
const lossGrace = 40 * time.Second

// releaseClass is the StorageClass that opts in.
const releaseClass = "tether-local-release"

// TestNodeLoss (issue 28): a StatefulSet's pod writes to a
// WaitForFirstConsumer local claim on node-2, of a class that releases
// claims on node loss. node-2's kubelet stops and the node is tainted
// node.kubernetes.io/out-of-service (then, in a second case, its Node
// object is deleted): the pod runs again on node-1 with a fresh volume
// within the grace plus 60 s, while a StatefulSet of a class without the
// policy stays Pending and nothing on node-1 is touched. When node-2
// comes back, its stale volume is on its disk, reported by its orphan
// sweep, not deleted.
func TestNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and two kubelet nodes")
	}
	start := time.Now()
	e := setUpRealWith(t, realOptions{
		// NotReady 20 s after the last renewal (default 50 s): the pod GC
		// force-deletes an out-of-service node's pods only once it is.
		kcmArgs: []string{"--node-monitor-grace-period=20s"},
		patches: nodeLossPatches(t, "--node-loss-grace="+lossGrace.String(), "--orphan-sweep-interval=10s"),
	})
	defer func() { t.Logf("TestNodeLoss: %s in all", time.Since(start).Round(time.Second)) }()
	c := e.c
	e.apply(t, "storageclass-local.yaml")
	e.createReleaseClass(t)

	// Nothing on node-1 may be touched: a claim of the class, in use there.
	e.claim(t, "bystander", releaseClass, "10Mi")
	e.startPod(t, "bystander", "node-1", "bystander")
	bystander := e.volumeOf(t, c.WaitClaimBound(t, "default", "bystander"))

	// The StatefulSets land on node-2 (node-1 cordoned meanwhile).
	e.cordon(t, "node-1", true)
	e.statefulSet(t, "web", releaseClass)
	e.statefulSet(t, "plain", "tether-local")
	for _, p := range []string{"web-0", "plain-0"} {
		e.waitRunningOn(t, p, "node-2")
	}
	e.cordon(t, "node-1", false)
	plainClaim := getClaim(t, c, "data-plain-0")

	t.Run("out-of-service", func(t *testing.T) {
		old := e.volumeOf(t, getClaim(t, c, "data-web-0"))
		oldClaim := getClaim(t, c, "data-web-0").UID
		n := e.nodes["node-2"]
		n.StopKubelet()
		waited := time.Now()
		e.waitNodeReady(t, "node-2", false)
		t.Logf("node-2 NotReady %s after its kubelet stopped", time.Since(waited).Round(time.Second))
		e.taintOutOfService(t, "node-2", true)
		lost := time.Now()

		e.waitRunningOnWith(t, "web-0", "node-1", lossGrace+90*time.Second)
		took := time.Since(lost)
		t.Logf("taint to web-0 Running on node-1: %s (grace %s)", took.Round(time.Second), lossGrace)
		if took > lossGrace+60*time.Second {
			t.Errorf("web-0 ran on node-1 %s after the taint, more than the grace (%s) plus 60 s", took.Round(time.Second), lossGrace)
		}
		e.checkReleased(t, old, oldClaim, "node-2")
		e.checkUntouched(t, plainClaim, bystander)

		n2 := e.returnNode(t, "node-2", true)
		e.waitRunningOn(t, "plain-0", "node-2") // its volume is still there
		e.checkReported(t, old, n2)
	})

	t.Run("Node deleted", func(t *testing.T) {
		e.cordon(t, "node-1", true)
		e.statefulSet(t, "db", releaseClass)
		e.waitRunningOn(t, "db-0", "node-2")
		e.cordon(t, "node-1", false)
		old := e.volumeOf(t, getClaim(t, c, "data-db-0"))
		oldClaim := getClaim(t, c, "data-db-0").UID
		e.nodes["node-2"].StopKubelet()
		if err := c.Client.CoreV1().Nodes().Delete(t.Context(), "node-2", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		lost := time.Now()
		e.waitRunningOnWith(t, "db-0", "node-1", lossGrace+90*time.Second)
		took := time.Since(lost)
		t.Logf("Node deletion to db-0 Running on node-1: %s (grace %s)", took.Round(time.Second), lossGrace)
		if took > lossGrace+60*time.Second {
			t.Errorf("db-0 ran on node-1 %s after the Node's deletion, more than the grace (%s) plus 60 s", took.Round(time.Second), lossGrace)
		}
		e.checkReleased(t, old, oldClaim, "node-2")
		e.checkUntouched(t, plainClaim, bystander)
		if p, err := c.Client.CoreV1().Pods("default").Get(t.Context(), "plain-0", metav1.GetOptions{}); err == nil && p.Status.Phase == corev1.PodRunning {
			t.Errorf("plain-0 (no policy) runs on %s while its node is deleted", p.Spec.NodeName)
		}

		n2 := e.returnNode(t, "node-2", false)
		e.checkReported(t, old, n2)
	})
}

// nodeLossPatches are kustomize patches of deploy/csi: the binder's and
// the provisioner's shipped arguments plus extra (each flag goes to the
// component that has it).
func nodeLossPatches(t *testing.T, extra ...string) []string {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	args := func(file, kind, container string) []string {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			var obj struct {
				Kind string `json:"kind"`
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj.Kind != kind {
				continue
			}
			for _, ct := range obj.Spec.Template.Spec.Containers {
				if ct.Name == container {
					return ct.Args
				}
			}
		}
		t.Fatalf("%s: no %s container %s", file, kind, container)
		return nil
	}
	binder := append(args("deploy/csi/base/binder.yaml", "Deployment", "binder"), "--node-loss-grace="+lossGrace.String())
	prov := args("deploy/csi/local/node-plugin.yaml", "DaemonSet", "provisioner")
	prov = append(prov, extra...)
	quote := func(a []string) string {
		b, _ := json.Marshal(a)
		return string(b)
	}
	return []string{
		fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: tether-binder, namespace: tether-system}
spec: {template: {spec: {containers: [{name: binder, args: %s}]}}}`, quote(binder)),
		fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: tether-local, namespace: tether-system}
spec: {template: {spec: {containers: [{name: provisioner, args: %s}]}}}`, quote(prov)),
	}
}

// createReleaseClass makes the class that releases claims on node loss.
func (e *realEnv) createReleaseClass(t *testing.T) {
	t.Helper()
	mode, reclaim := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: releaseClass,
		Annotations: map[string]string{nodeloss.AnnPolicy: "true"}},
		Provisioner: cluster.LocalDriver, VolumeBindingMode: &mode, ReclaimPolicy: &reclaim}
	if _, err := e.c.Client.StorageV1().StorageClasses().Create(t.Context(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startPod runs a pod that keeps the claim mounted, on node.
func (e *realEnv) startPod(t *testing.T, name, node, claim string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"kubernetes.io/hostname": node}, TerminationGracePeriodSeconds: ptr(int64(1)),
		Containers: []corev1.Container{{Name: "c", Image: cluster.BusyboxImage, Command: []string{"sleep", "3600"},
			VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/data"}}}},
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
	if _, err := e.c.Client.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitRunningOn(t, name, node)
}

// statefulSet makes a StatefulSet of one pod that writes its host name to
// its claim data-<name>-0 (10Mi of class) and sleeps.
func (e *realEnv) statefulSet(t *testing.T, name, class string) {
	t.Helper()
	labels := map[string]string{"app": name}
	ss := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}, ServiceName: name,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers: []corev1.Container{{Name: "c", Image: cluster.BusyboxImage,
				Command:      []string{"sh", "-c", "hostname >> /data/log && sync && exec sleep 3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}}}}},
	}}
	if _, err := e.c.Client.AppsV1().StatefulSets("default").Create(t.Context(), ss, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cordon marks a node unschedulable, or schedulable again.
func (e *realEnv) cordon(t *testing.T, node string, on bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
	if _, err := e.c.Client.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// taintOutOfService adds the non-graceful shutdown taint, as its docs
// write it, or removes it.
func (e *realEnv) taintOutOfService(t *testing.T, node string, on bool) {
	t.Helper()
	cluster.Eventually(t, "taint of "+node, func(ctx context.Context) (bool, error) {
		n, err := e.c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService })
		if on {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
		}
		_, err = e.c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

func (e *realEnv) waitNodeReady(t *testing.T, node string, ready bool) {
	t.Helper()
	cluster.Eventually(t, fmt.Sprintf("node %s Ready=%v", node, ready), func(ctx context.Context) (bool, error) {
		n, err := e.c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return (cond.Status == corev1.ConditionTrue) == ready, nil
			}
		}
		return false, nil
	})
}

func (e *realEnv) waitRunningOn(t *testing.T, name, node string) {
	t.Helper()
	e.waitRunningOnWith(t, name, node, 0)
}

// waitRunningOnWith waits for a pod Running on node, polling until
// timeout (0: the harness's default).
func (e *realEnv) waitRunningOnWith(t *testing.T, name, node string, timeout time.Duration) {
	t.Helper()
	ok := func(ctx context.Context) (bool, error) {
		p, err := e.c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node, nil
	}
	if timeout == 0 {
		cluster.Eventually(t, "pod "+name+" Running on "+node, ok)
		return
	}
	for deadline := time.Now().Add(timeout); ; {
		if done, _ := ok(t.Context()); done {
			return
		}
		if time.Now().After(deadline) {
			e.logClaimAndPod(t, name)
			t.Fatalf("pod %s not Running on %s after %s", name, node, timeout)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(time.Second):
		}
	}
}

// logClaimAndPod logs what a StatefulSet's pod and its claim are at.
func (e *realEnv) logClaimAndPod(t *testing.T, name string) {
	t.Helper()
	if p, err := e.c.Client.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{}); err == nil {
		t.Logf("pod %s: node %q phase %s deleting %v conditions %+v", name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil, p.Status.Conditions)
	}
	if c, err := e.c.Client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), "data-"+name, metav1.GetOptions{}); err == nil {
		t.Logf("claim data-%s: uid %s volume %q phase %s deleting %v finalizers %v", name, c.UID, c.Spec.VolumeName, c.Status.Phase, c.DeletionTimestamp != nil, c.Finalizers)
	}
}

// checkReleased: the claim was made again on node-1; the old PV (Delete)
// is gone, its volume still on the lost node's disk; the events say so.
func (e *realEnv) checkReleased(t *testing.T, old *corev1.PersistentVolume, oldClaim types.UID, lostNode string) {
	t.Helper()
	c := e.c
	claim := getClaim(t, c, old.Spec.ClaimRef.Name)
	if claim.UID == oldClaim {
		t.Errorf("claim %s is the same claim (uid %s)", claim.Name, claim.UID)
	}
	if pv := e.volumeOf(t, c.WaitClaimBound(t, "default", claim.Name)); e.nodeOf(pv) != "node-1" || pv.Name == old.Name {
		t.Errorf("claim %s is bound to %s on %s", claim.Name, pv.Name, e.nodeOf(pv))
	}
	cluster.WaitGone(t, "PV "+old.Name, func(ctx context.Context) error {
		_, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, old.Name, metav1.GetOptions{})
		return err
	})
	if !e.onDisk(t, lostNode, old.Spec.CSI.VolumeHandle) {
		t.Errorf("volume %s is gone from %s's disk", old.Spec.CSI.VolumeHandle, lostNode)
	}
	events, err := c.Client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]bool{}
	for _, ev := range events.Items {
		if ev.Reason == "ReleasedForNodeLoss" && (ev.InvolvedObject.UID == oldClaim || ev.InvolvedObject.Name == old.Name || ev.InvolvedObject.Name == lostNode) {
			on[ev.InvolvedObject.Kind] = true
		}
	}
	for _, kind := range []string{"PersistentVolumeClaim", "PersistentVolume", "Node"} {
		if !on[kind] {
			t.Errorf("no ReleasedForNodeLoss event on the %s", kind)
		}
	}
}

// checkUntouched: the claim of the class without the policy is the same
// and its PV unmarked; the claim on node-1 is the same, bound, unmarked,
// its volume on node-1's disk.
func (e *realEnv) checkUntouched(t *testing.T, plain *corev1.PersistentVolumeClaim, bystander *corev1.PersistentVolume) {
	t.Helper()
	c := e.c
	for _, want := range []struct {
		claim string
		uid   types.UID
		pv    string
	}{{plain.Name, plain.UID, plain.Spec.VolumeName}, {bystander.Spec.ClaimRef.Name, bystander.Spec.ClaimRef.UID, bystander.Name}} {
		got, err := c.Client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), want.claim, metav1.GetOptions{})
		if err != nil || got.UID != want.uid || got.DeletionTimestamp != nil {
			t.Errorf("claim %s: %v (uid %v, want %s)", want.claim, err, got.UID, want.uid)
			continue
		}
		pv, err := c.Client.CoreV1().PersistentVolumes().Get(t.Context(), want.pv, metav1.GetOptions{})
		if err != nil {
			t.Errorf("PV %s: %v", want.pv, err)
			continue
		}
		for _, k := range nodeloss.Marks {
			if _, ok := pv.Annotations[k]; ok {
				t.Errorf("PV %s carries %s", pv.Name, k)
			}
		}
	}
	if !e.onDisk(t, "node-1", bystander.Spec.CSI.VolumeHandle) {
		t.Errorf("the bystander's volume %s is gone from node-1's disk", bystander.Spec.CSI.VolumeHandle)
	}
	e.waitRunningOn(t, "bystander", "node-1")
}

// returnNode starts the node's kubelet again, waits for it to be Ready
// and, when it was tainted, removes the taint; it returns when the node
// came back.
func (e *realEnv) returnNode(t *testing.T, node string, untaint bool) time.Time {
	t.Helper()
	back := time.Now()
	if err := e.nodes[node].StartKubelet(); err != nil {
		t.Fatal(err)
	}
	e.waitNodeReady(t, node, true)
	if untaint {
		e.taintOutOfService(t, node, false)
	}
	e.waitDeployed(t)
	e.waitDriverBack(t, node, back)
	t.Logf("%s back and deploy/csi running on it %s after its kubelet started", node, time.Since(back).Round(time.Second))
	return back
}

// waitDriverBack waits until the node runs one tether-local pod, Ready
// since its kubelet came back (the DaemonSet's status may still count the
// pod from before), and its CSINode lists the driver again.
func (e *realEnv) waitDriverBack(t *testing.T, node string, back time.Time) {
	t.Helper()
	cluster.Eventually(t, "one tether-local pod on "+node+", Ready since it came back", func(ctx context.Context) (bool, error) {
		pods, err := e.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tether-local"})
		if err != nil {
			return false, nil
		}
		var on []corev1.Pod
		for _, p := range pods.Items {
			if p.Spec.NodeName == node {
				on = append(on, p)
			}
		}
		return len(on) == 1 && on[0].DeletionTimestamp == nil && readySince(&on[0], back), nil
	})
	e.c.WaitDriverRegistered(t, node)
}

// readySince reports whether a pod is Ready, and became so at or after t
// (conditions carry whole seconds).
func readySince(p *corev1.Pod, t time.Time) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && !c.LastTransitionTime.Time.Before(t.Truncate(time.Second))
		}
	}
	return false
}

// checkReported: the old volume is still on the node's disk and its
// provisioner's orphan sweep reported it since the node came back.
func (e *realEnv) checkReported(t *testing.T, old *corev1.PersistentVolume, back time.Time) {
	t.Helper()
	handle := old.Spec.CSI.VolumeHandle
	node := e.nodeOf(old)
	cluster.Eventually(t, "an OrphanVolume event for "+handle, func(ctx context.Context) (bool, error) {
		events, err := e.c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, ev := range events.Items {
			if ev.Reason == "OrphanVolume" && strings.Contains(ev.Message, handle) && !eventTime(ev).Before(back) {
				t.Logf("reported %s after the node came back: %s", eventTime(ev).Sub(back).Round(time.Second), ev.Message)
				return true, nil
			}
		}
		return false, nil
	})
	if !e.onDisk(t, node, handle) {
		t.Errorf("volume %s was deleted from %s's disk", handle, node)
	}
	if _, err := e.c.Client.CoreV1().PersistentVolumes().Get(t.Context(), old.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("PV %s: %v", old.Name, err)
	}
}

func eventTime(ev corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.FirstTimestamp.Time
}
