package cluster

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRealNode: a kubelet node goes Ready, runs a busybox pod that reaches
// the API server through its bridge, and leaves nothing on the host (the
// node's clean-up checks that).
func TestRealNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and a kubelet node")
	}
	CheckRealNodeHost(t)
	start := time.Now()
	c := Start(t, Options{RealNodes: true, Controllers: []string{"serviceaccount", "serviceaccount-token", "root-ca-cert-publisher"}})
	node := c.StartRealNode(t, "real-1", NodeImages(t))
	t.Logf("control plane and node up in %s", time.Since(start).Round(100*time.Millisecond))

	ctx := t.Context()
	api, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	host, port := api.Hostname(), api.Port()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, NodeName: "real-1",
		Containers: []corev1.Container{{Name: "hello", Image: BusyboxImage,
			// The API server's port is open to the pod, through the node's bridge.
			Command: []string{"sh", "-c", "echo hello from $(hostname); nc -w 5 " + host + " " + port + " </dev/null && echo reached the API server"}}},
	}}
	// Admission wants the namespace's default ServiceAccount, which KCM makes.
	Eventually(t, "pod hello created", func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, nil
	})
	Eventually(t, "pod hello Succeeded", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, nil
	})
	logs, err := c.Client.CoreV1().Pods("default").GetLogs("hello", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs through kubelet: %v", err)
	}
	if got := string(logs); !strings.Contains(got, "hello from hello") || !strings.Contains(got, "reached the API server") {
		t.Errorf("pod log %q: want its greeting and the API server reached", got)
	}
	if out, err := node.Exec(ctx, "ls", "/var/lib/kubelet/pods"); err != nil || len(strings.Fields(string(out))) == 0 {
		t.Errorf("the node's /var/lib/kubelet/pods: %q, %v", out, err)
	}
}
