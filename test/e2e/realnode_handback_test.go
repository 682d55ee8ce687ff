package e2e

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/test/cluster"
)

// handBackControllerMode runs docs/migration.md's switch back for a
// driver whose provisioner is a controller's sidecar (its socket in an
// emptyDir no other pod reaches): a phase of TestOwnDriverRecipe, on its
// control plane and real node, with the own-driver recipe running. With
// tether's binder stopped, a claim is provisioned and keeps tether's
// in-flight record; the sidecar's image goes back to EP v6.4.0's and KCM's
// binder is turned on; `kubectl tether hand-back deployment/...` runs
// tether's provisioner with --hand-back in the driver's pod and exits 0;
// the record is gone, KCM binds the claim to tether's PV, and once the
// claim is deleted EP deletes the volume: no claim left Terminating, no
// volume left behind. The node must hold EP's image
// (cluster.UpstreamImages).
func handBackControllerMode(t *testing.T, c *cluster.Cluster) {
	start := time.Now()
	plugin := cluster.BuildBinary(t, "./cmd/kubectl-tether")
	ns, deploy := cluster.OwnDriverNamespace, cluster.OwnDriverDeploy
	claim, pvName := recordedClaim(t, c, "handed", cluster.OwnDriverClass, cluster.OwnDriverName, "")

	// The switch back: EP's image in the sidecar, KCM's binder on.
	c.Kubectl(t, nil, "-n", ns, "set", "image", "deployment/"+deploy, "csi-provisioner="+cluster.UpstreamProvisionerImage)
	c.Kubectl(t, nil, "-n", ns, "rollout", "status", "deployment/"+deploy, "--timeout=3m")
	c.StartControllerManager(t, []string{"persistentvolume-binder-controller"})
	pod := ownDriverPod(t, c)
	if img := findPodContainer(pod, "csi-provisioner").Image; img != cluster.UpstreamProvisionerImage {
		t.Fatalf("the sidecar runs %s, not EP's image", img)
	}
	keepRecord(t, c, claim.Name, cluster.OwnDriverName, pvName)
	out := runHandBack(t, c, plugin, 0, "-n", ns, "deployment/"+deploy)
	if !strings.Contains(out, "no claim holds the in-flight record") {
		t.Errorf("kubectl tether hand-back said:\n%s", out)
	}
	settleHandedBack(t, c, claim.Name, pvName)
	pod = ownDriverPod(t, c)
	var names []string
	for _, ec := range pod.Spec.EphemeralContainers {
		names = append(names, ec.Name)
	}
	if !slices.Equal(names, []string{"tether-hand-back-1"}) {
		t.Errorf("the pod's ephemeral containers %v", names)
	}
	t.Logf("switch back with the in-cluster hand-back: %s", time.Since(start).Round(time.Second))
}

// recordedClaim stops tether's binder and creates a claim of class with
// the provisioner's annotation (which a binder writes) and, for node mode,
// the selected node: tether's provisioner saves its PV, and with no binder
// the claim stays Pending with tether's in-flight record. It returns the
// claim and its PV's name.
func recordedClaim(t *testing.T, c *cluster.Cluster, name, class, driver, node string) (*corev1.PersistentVolumeClaim, string) {
	t.Helper()
	c.Kubectl(t, nil, "-n", namespace, "scale", "deployment/tether-binder", "--replicas=0")
	cluster.Eventually(t, "no binder pod", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tether-binder"})
		return err == nil && len(pods.Items) == 0, nil
	})
	ann := map[string]string{"volume.kubernetes.io/storage-provisioner": driver, "volume.beta.kubernetes.io/storage-provisioner": driver}
	if node != "" {
		ann["volume.kubernetes.io/selected-node"] = node
	}
	pvcs := c.Client.CoreV1().PersistentVolumeClaims("default")
	claim, err := pvcs.Create(t.Context(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: ann},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pvName string
	cluster.Eventually(t, "the claim's PV saved, the claim with tether's record", func(ctx context.Context) (bool, error) {
		pvs, err := c.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, pv := range pvs.Items {
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == claim.UID {
				pvName = pv.Name
			}
		}
		got, err := pvcs.Get(ctx, name, metav1.GetOptions{})
		return err == nil && pvName != "" && slices.Contains(got.Finalizers, inflight.Finalizer), nil
	})
	return claim, pvName
}

// keepRecord puts tether's record back on the claim if it was settled:
// tether leaves it for a binder for 2 minutes after the PV is saved, and
// on a loaded machine the switch may take longer; the hand-back must find
// one.
func keepRecord(t *testing.T, c *cluster.Cluster, name, driver, pvName string) {
	t.Helper()
	pvcs := c.Client.CoreV1().PersistentVolumeClaims("default")
	cur, err := pvcs.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !inflight.Holds(cur) {
		t.Log("the record was settled before the switch ended; writing it back as tether holds it within 2 minutes of the save")
		inflight.Record(cur, driver, pvName)
		if _, err := pvcs.Update(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// runHandBack runs `kubectl tether hand-back` (the plugin binary) with
// tether's provisioner image and args, wants exit status want, and returns
// what it printed.
func runHandBack(t *testing.T, c *cluster.Cluster, plugin string, want int, args ...string) string {
	t.Helper()
	started := time.Now()
	args = append([]string{"hand-back", "--kubeconfig", c.Kubeconfig, "--image", cluster.ProvisionerImage, "--timeout", "5m"}, args...)
	cmd := exec.CommandContext(t.Context(), plugin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	t.Logf("kubectl tether hand-back (%s):\n%s", time.Since(started).Round(100*time.Millisecond), out.String())
	if code := cmd.ProcessState.ExitCode(); code != want {
		t.Fatalf("kubectl tether hand-back: status %d, want %d", code, want)
	}
	return out.String()
}

// settleHandedBack checks a claim after the hand-back: no tether record,
// bound by KCM's binder to tether's PV, and once deleted, gone with its
// PV (deleted by EP).
func settleHandedBack(t *testing.T, c *cluster.Cluster, name, pvName string) {
	t.Helper()
	pvcs := c.Client.CoreV1().PersistentVolumeClaims("default")
	got, err := pvcs.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil || slices.Contains(got.Finalizers, inflight.Finalizer) {
		t.Fatalf("after the hand-back the claim still holds tether's record: %v %v", got.Finalizers, err)
	}
	if bound := c.WaitClaimBound(t, "default", name); bound.Spec.VolumeName != pvName {
		t.Errorf("KCM bound the claim to %s, not tether's PV %s", bound.Spec.VolumeName, pvName)
	}
	if err := pvcs.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cluster.WaitGone(t, "claim "+name, func(ctx context.Context) error {
		_, err := pvcs.Get(ctx, name, metav1.GetOptions{})
		return err
	})
	cluster.WaitGone(t, "PV "+pvName+" (deleted by EP)", func(ctx context.Context) error {
		_, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return err
	})
}

// handBackNodeMode is handBackControllerMode for node-deployment mode: a
// phase of TestRealNodeReadOnlyPublish, with deploy/csi's DaemonSet
// running on e's nodes (which hold EP's image). A claim is provisioned on
// node-1 by its node's provisioner; EP's image goes in the DaemonSet's
// provisioner container (with EP's rules for the capacity objects it
// watches); `kubectl tether hand-back daemonset/tether-local` runs in every
// pod.
func handBackNodeMode(t *testing.T, e *realEnv) {
	start := time.Now()
	c := e.c
	plugin := cluster.BuildBinary(t, "./cmd/kubectl-tether")
	nodes := slices.Sorted(maps.Keys(e.nodes))
	claim, pvName := recordedClaim(t, c, "node-handed", "tether-local", cluster.LocalDriver, "node-1")

	c.Kubectl(t, []byte(cluster.UpstreamPatches[0]), "apply", "-f", "-") // EP's Role rules
	c.Kubectl(t, nil, "-n", namespace, "patch", "daemonset/tether-local", "--type=strategic", "-p",
		`{"spec":{"template":{"spec":{"containers":[{"name":"provisioner","image":"`+cluster.UpstreamProvisionerImage+`","livenessProbe":null}]}}}}`)
	c.Kubectl(t, nil, "-n", namespace, "rollout", "status", "daemonset/tether-local", "--timeout=4m")
	c.StartControllerManager(t, []string{"persistentvolume-binder-controller"})
	for _, node := range nodes {
		if img := findPodContainer(e.driverPod(t, node), "provisioner").Image; img != cluster.UpstreamProvisionerImage {
			t.Fatalf("the provisioner on %s runs %s, not EP's image", node, img)
		}
	}

	keepRecord(t, c, claim.Name, cluster.LocalDriver, pvName)
	out := runHandBack(t, c, plugin, 0, "-n", namespace, "daemonset/tether-local", "--container", "provisioner")
	if n := strings.Count(out, "no claim holds the in-flight record"); n != len(nodes) {
		t.Errorf("kubectl tether hand-back ran in %d pods, want %d:\n%s", n, len(nodes), out)
	}
	settleHandedBack(t, c, claim.Name, pvName)
	t.Logf("node-mode switch back with the in-cluster hand-back: %s", time.Since(start).Round(time.Second))
}
