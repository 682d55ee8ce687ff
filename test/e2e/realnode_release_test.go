package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// TestReleasePinsRunOnARealNode: a real node imports the archives of `make
// images` (ctr images import, as the README says; there is no registry),
// and a pod names each of tether's images as tether.yaml does,
// <repo>:<tag>@<index digest>, with the default pull policy: kubelet finds
// the image without pulling, runs it (--version), and reports the index
// digest as the container's imageID.
func TestReleasePinsRunOnARealNode(t *testing.T) {
	e := startReal(t)
	node := e.c.StartRealNode(t, "node-1", cluster.NodeImages(t))
	pods := e.c.Client.CoreV1().Pods("default")
	for _, img := range cluster.ReleaseImages(t) {
		name := "pinned-" + img.Ref[strings.LastIndex(img.Ref, "/")+1:strings.LastIndex(img.Ref, ":")]
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
			NodeName: node.Name, RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptr(false),
			Containers: []corev1.Container{{Name: "c", Image: img.Pin, Args: []string{"--version"}}}}}
		if _, err := pods.Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var got *corev1.Pod
		cluster.Eventually(t, "pod "+name+" ("+img.Pin+") Succeeded", func(ctx context.Context) (bool, error) {
			var err error
			got, err = pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, st := range got.Status.ContainerStatuses {
				if w := st.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
					t.Fatalf("%s: kubelet pulls %s: %s", name, img.Pin, w.Message)
				}
			}
			if got.Status.Phase == corev1.PodFailed {
				t.Fatalf("%s failed: %s", name, e.podLog(t, name))
			}
			return got.Status.Phase == corev1.PodSucceeded, nil
		})
		digest := img.Pin[strings.LastIndex(img.Pin, "@")+1:]
		if id := got.Status.ContainerStatuses[0].ImageID; !strings.HasSuffix(id, "@"+digest) {
			t.Errorf("%s: imageID %q, want the index digest %s", name, id, digest)
		}
		t.Logf("%s: %s ran from the imported archive, imageID %s: %s", name, img.Pin, got.Status.ContainerStatuses[0].ImageID,
			strings.TrimSpace(e.podLog(t, name)))
	}
}
