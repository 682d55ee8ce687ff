package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-csi/tether/test/cluster"
)

const pollTimeout = 60 * time.Second

// startBinder runs our binder as a real process against c, with a
// kubeconfig whose every request must be one deploy/csi's RBAC allows the
// binder (cluster.RBACCheckedKubeconfig).
func startBinder(t *testing.T, c *cluster.Cluster, extra ...string) *cluster.Process {
	t.Helper()
	path := cluster.BuildBinary(t, "./cmd/binder")
	args := append([]string{"--kubeconfig=" + c.RBACCheckedKubeconfig(t, "tether-binder"), "--leader-elect=false", "--resync-period=5s", "-v=4"}, extra...)
	return c.Run(t, cluster.ProcessOptions{Name: "binder", Path: path, Args: args})
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, pollTimeout, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func getClaim(t *testing.T, cs kubernetes.Interface, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc, err := cs.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pvc
}

func getPV(t *testing.T, cs kubernetes.Interface, name string) *corev1.PersistentVolume {
	t.Helper()
	pv, err := cs.CoreV1().PersistentVolumes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

// waitClaimBound waits for the claim to be Bound and returns it.
func waitClaimBound(t *testing.T, cs kubernetes.Interface, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	var pvc *corev1.PersistentVolumeClaim
	eventually(t, "claim "+name+" Bound", func(ctx context.Context) (bool, error) {
		var err error
		pvc, err = cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, nil
	})
	return pvc
}

func waitVolumePhase(t *testing.T, cs kubernetes.Interface, name string, phase corev1.PersistentVolumePhase) *corev1.PersistentVolume {
	t.Helper()
	var pv *corev1.PersistentVolume
	eventually(t, fmt.Sprintf("volume %s %s", name, phase), func(ctx context.Context) (bool, error) {
		var err error
		pv, err = cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && pv.Status.Phase == phase, nil
	})
	return pv
}

// waitEvent waits for an event with this reason on the named object, and
// whose message contains every one of contains.
func waitEvent(t *testing.T, cs kubernetes.Interface, namespace, name, reason string, contains ...string) corev1.Event {
	t.Helper()
	var found corev1.Event
	eventually(t, "event "+reason+" on "+name, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
		if err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.Reason == reason && containsAll(e.Message, contains) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

func mustCreate[T any](t *testing.T, create func(context.Context, T, metav1.CreateOptions) (T, error), obj T) T {
	t.Helper()
	out, err := create(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func createClass(t *testing.T, cs kubernetes.Interface, name, provisioner string, mode storagev1.VolumeBindingMode, isDefault bool) {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	if isDefault {
		sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	mustCreate(t, cs.StorageV1().StorageClasses().Create, sc)
}

func deleteClaim(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	err := cs.CoreV1().PersistentVolumeClaims("default").Delete(t.Context(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
