package e2ekind

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

func kindEnabled() bool { return os.Getenv("TETHER_KIND") == "1" }

func ptr[T any](v T) *T { return &v }

// waitBound waits for a claim to be Bound and returns it.
func (e *env) waitBound(t *testing.T, ctx context.Context, ns, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	var c *corev1.PersistentVolumeClaim
	e.eventually(t, ctx, 3*time.Minute, "claim "+name+" Bound", func(ctx context.Context) (bool, string) {
		var err error
		c, err = e.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return c.Status.Phase == corev1.ClaimBound, string(c.Status.Phase)
	})
	return c
}

// waitPod waits for a pod to reach phase and returns its node.
func (e *env) waitPod(t *testing.T, ctx context.Context, ns, name string, phase corev1.PodPhase) string {
	t.Helper()
	var node string
	e.eventually(t, ctx, 3*time.Minute, "pod "+name+" "+string(phase), func(ctx context.Context) (bool, string) {
		p, err := e.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Status.Phase == corev1.PodFailed && phase != corev1.PodFailed {
			t.Fatalf("pod %s failed: %s", name, e.logs(ctx, name))
		}
		node = p.Spec.NodeName
		return p.Status.Phase == phase, string(p.Status.Phase)
	})
	return node
}

// readBack runs a pod of sh -c script on claim; it must succeed and, if
// want is set, print it.
func (e *env) readBack(t *testing.T, ctx context.Context, name, claim, script, want string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "c", Image: cluster.ExamplesBusyboxImage, Command: []string{"sh", "-c", script},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		}}, Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}},
	}
	if _, err := e.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPod(t, ctx, "default", name, corev1.PodSucceeded)
	out := e.logs(ctx, name)
	if strings.TrimSpace(out) == "" || (want != "" && !strings.Contains(out, want)) {
		t.Errorf("pod %s (%s) printed %q, want %q", name, script, out, want)
	}
}

// waitLog waits until a pod's log holds want.
func (e *env) waitLog(t *testing.T, ctx context.Context, pod, want string) {
	t.Helper()
	e.eventually(t, ctx, time.Minute, fmt.Sprintf("pod %s says %q", pod, want), func(ctx context.Context) (bool, string) {
		out := e.logs(ctx, pod)
		return strings.Contains(out, want), out
	})
}

func (e *env) logs(ctx context.Context, pod string) string {
	b, err := e.client.CoreV1().Pods("default").GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// volumeOf is a bound claim's PV.
func (e *env) volumeOf(t *testing.T, ctx context.Context, ns, claim string) *corev1.PersistentVolume {
	t.Helper()
	c := e.waitBound(t, ctx, ns, claim)
	pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

// pinnedNode is the node a local PV's affinity names.
func pinnedNode(pv *corev1.PersistentVolume) string { return cluster.PVNode(pv) }
