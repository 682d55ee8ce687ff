package e2ekind

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/test/cluster"
)

// kcmManifest is kube-controller-manager's static pod on a kind (kubeadm)
// control plane, and binderOff the part of its --controllers value that
// turns its PV binder off (the kind config's, as the README gives it).
const (
	kcmManifest = "/etc/kubernetes/manifests/kube-controller-manager.yaml"
	binderOff   = ",-persistentvolume-binder-controller"
)

// handBack runs docs/migration.md's "Switching back" on kind, with the
// own-driver recipe installed: tether's binder scaled to zero, a claim of
// the mock driver's class provisioned by tether and holding its in-flight
// record; EP v6.4.0's image put back in the driver's pod and KCM's binder
// turned back on (its static pod's --controllers edited, as an admin of a
// kubeadm cluster does); then the bundle's `kubectl tether hand-back`
// exits 0, the record is gone, KCM binds the claim to tether's PV, and
// once the claim is deleted EP deletes its volume. KCM's binder is turned
// off again at the end, for the scenarios after it.
func (e *env) handBack(t *testing.T, ctx context.Context, bundle string) {
	start := time.Now()
	ns, deploy := cluster.OwnDriverNamespace, cluster.OwnDriverDeploy
	e.loadImages(t, ctx, cluster.UpstreamImages(t))
	plugin := e.bundlePlugin(t, bundle)

	if out, err := e.run(ctx, "", "kubectl", "-n", cluster.DeployNamespace, "scale", "deployment/tether-binder", "--replicas=0"); err != nil {
		t.Fatalf("scale tether's binder to zero: %v\n%s", err, out)
	}
	e.eventually(t, ctx, 2*time.Minute, "no binder pod", func(ctx context.Context) (bool, string) {
		pods, err := e.client.CoreV1().Pods(cluster.DeployNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tether-binder"})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
	// What a binder writes on a claim of an external class, so that the
	// provisioner takes it with no binder running.
	ann := map[string]string{"volume.kubernetes.io/storage-provisioner": cluster.OwnDriverName, "volume.beta.kubernetes.io/storage-provisioner": cluster.OwnDriverName}
	pvcs := e.client.CoreV1().PersistentVolumeClaims("default")
	claim, err := pvcs.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "handed", Annotations: ann},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr(cluster.OwnDriverClass), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pvName string
	e.eventually(t, ctx, 2*time.Minute, "the claim's PV saved, the claim holding tether's record", func(ctx context.Context) (bool, string) {
		pvs, err := e.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, pv := range pvs.Items {
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == claim.UID {
				pvName = pv.Name
			}
		}
		got, err := pvcs.Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pvName != "" && slices.Contains(got.Finalizers, inflight.Finalizer), fmt.Sprintf("PV %q, finalizers %v", pvName, got.Finalizers)
	})

	// The switch back: EP's image in the sidecar, KCM's binder on.
	for _, args := range [][]string{
		{"-n", ns, "set", "image", "deployment/" + deploy, "csi-provisioner=" + cluster.UpstreamProvisionerImage},
		{"-n", ns, "rollout", "status", "deployment/" + deploy, "--timeout=3m"},
	} {
		if out, err := e.run(ctx, "", "kubectl", args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	e.setKCMBinder(t, ctx, true)
	t.Cleanup(func() { e.setKCMBinder(t, context.Background(), false) })
	e.keepRecord(t, ctx, claim.Name, pvName)

	out, err := e.run(ctx, "", plugin, "hand-back", "--image", "ghcr.io/tether-csi/provisioner:"+bundleVersion, "--timeout", "5m", "-n", ns, "deployment/"+deploy)
	t.Logf("kubectl tether hand-back:\n%s", out)
	if err != nil {
		t.Fatalf("kubectl tether hand-back: %v", err)
	}
	if !strings.Contains(out, "no claim holds the in-flight record") {
		t.Errorf("kubectl tether hand-back said:\n%s", out)
	}
	got, err := pvcs.Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil || slices.Contains(got.Finalizers, inflight.Finalizer) {
		t.Fatalf("after the hand-back the claim still holds tether's record: %v %v", got.Finalizers, err)
	}
	if bound := e.waitBound(t, ctx, "default", claim.Name); bound.Spec.VolumeName != pvName {
		t.Errorf("KCM bound the claim to %s, not tether's PV %s", bound.Spec.VolumeName, pvName)
	}
	if err := pvcs.Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually(t, ctx, 3*time.Minute, "claim and PV "+pvName+" gone (deleted by EP)", func(ctx context.Context) (bool, string) {
		_, cerr := pvcs.Get(ctx, claim.Name, metav1.GetOptions{})
		_, perr := e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return apierrors.IsNotFound(cerr) && apierrors.IsNotFound(perr), fmt.Sprintf("claim: %v; PV: %v", cerr, perr)
	})
	e.setKCMBinder(t, ctx, false)
	t.Logf("TIMING switch back with the in-cluster hand-back (EP's image, KCM's binder on, kubectl tether hand-back, KCM bound, EP deleted): %v", since(start))
}

// keepRecord puts tether's record back on the claim if tether settled it
// before the switch ended (it leaves it for a binder for 2 minutes after
// the PV is saved): the hand-back must find one.
func (e *env) keepRecord(t *testing.T, ctx context.Context, name, pvName string) {
	t.Helper()
	pvcs := e.client.CoreV1().PersistentVolumeClaims("default")
	cur, err := pvcs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !inflight.Holds(cur) {
		t.Log("the record was settled before the switch ended; writing it back as tether holds it within 2 minutes of the save")
		inflight.Record(cur, cluster.OwnDriverName, pvName)
		if _, err := pvcs.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// setKCMBinder turns KCM's PV binder on or off by editing its static
// pod's --controllers on the control-plane node, and waits for the
// kubelet to run the edited pod.
func (e *env) setKCMBinder(t *testing.T, ctx context.Context, on bool) {
	t.Helper()
	node := clusterName() + "-control-plane"
	edit := `s/\(--controllers=[^ "]*\)` + binderOff + `/\1/`
	if !on {
		edit = `/--controllers=/{/` + binderOff + `/!s/\(--controllers=[^ "]*\)/\1` + binderOff + `/}`
	}
	if out, err := e.d.Docker(ctx, "exec", node, "sed", "-i", edit, kcmManifest); err != nil {
		t.Fatalf("edit %s on %s: %v\n%s", kcmManifest, node, err, out)
	}
	e.eventually(t, ctx, 3*time.Minute, fmt.Sprintf("kube-controller-manager running with its binder on=%v", on), func(ctx context.Context) (bool, string) {
		pod, err := e.client.CoreV1().Pods("kube-system").Get(ctx, "kube-controller-manager-"+node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		args := strings.Join(append(pod.Spec.Containers[0].Command, pod.Spec.Containers[0].Args...), " ")
		ready := false
		for _, c := range pod.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		return strings.Contains(args, binderOff) != on && ready, args
	})
}

// loadImages loads images into every node of the cluster.
func (e *env) loadImages(t *testing.T, ctx context.Context, images []cluster.Image) {
	t.Helper()
	dir := t.TempDir()
	for i, img := range images {
		archive := filepath.Join(dir, fmt.Sprintf("image-%d.tar", i))
		if err := img.WriteArchive(archive); err != nil {
			t.Fatal(err)
		}
		if out, err := e.run(ctx, "", e.kind, "load", "image-archive", archive); err != nil {
			t.Fatalf("kind load image-archive %s: %v\n%s", img.Ref, err, out)
		}
	}
}

// bundlePlugin unpacks the bundle's kubectl-tether for this machine and
// returns its path.
func (e *env) bundlePlugin(t *testing.T, bundle string) string {
	t.Helper()
	dir := t.TempDir()
	archive := filepath.Join(bundle, "kubectl-tether_"+bundleVersion+"_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz")
	if out, err := exec.Command("tar", "-xzf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xzf %s: %v\n%s", archive, err, out)
	}
	return filepath.Join(dir, "kubectl-tether")
}
