package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// TestE2E applies each example and checks its outcome, with the binder (2
// replicas) and the provisioners running as deploy/csi's ServiceAccounts.
func TestE2E(t *testing.T) {
	e := setUp(t)
	c := e.c
	cs := c.Client
	pvcs, pods := cs.CoreV1().PersistentVolumeClaims("default"), cs.CoreV1().Pods("default")
	e.apply(t, "storageclass-local.yaml")

	t.Run("dynamic Immediate", func(t *testing.T) {
		e.apply(t, "claim-immediate.yaml")
		pv := e.volumeOf(t, c.WaitClaimBound(t, "default", "scratch"))
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != cluster.LocalDriver || e.nodeOf(pv) == "" {
			t.Errorf("PV %s: CSI %+v, node %q", pv.Name, pv.Spec.CSI, e.nodeOf(pv))
		}
	})

	t.Run("WaitForFirstConsumer with a pod", func(t *testing.T) {
		e.apply(t, "claim-and-pod.yaml")
		pv := e.volumeOf(t, c.WaitClaimBound(t, "default", "web-data"))
		node := e.waitPodNode(t, "web")
		if e.nodeOf(pv) != node {
			t.Errorf("pod on %s, volume on %s", node, e.nodeOf(pv))
		}
		if !e.backendHas(t, node, pv.Spec.CSI.VolumeHandle) {
			t.Errorf("the driver on %s has no volume %s", node, pv.Spec.CSI.VolumeHandle)
		}
	})

	t.Run("static local PV with node affinity", func(t *testing.T) {
		e.apply(t, "static-local-pv.yaml")
		if got := c.WaitClaimBound(t, "default", "static-data").Spec.VolumeName; got != "static-node-1" {
			t.Errorf("bound to %s", got)
		}
		if node := e.waitPodNode(t, "static-app"); node != "node-1" {
			t.Errorf("pod on %s, its disk is on node-1", node)
		}
	})

	t.Run("pre-bound PV", func(t *testing.T) {
		e.apply(t, "prebound-pv.yaml")
		if got := c.WaitClaimBound(t, "default", "db-data").Spec.VolumeName; got != "reserved-for-db" {
			t.Errorf("bound to %s, want reserved-for-db", got)
		}
	})

	t.Run("claim with volumeName", func(t *testing.T) {
		e.apply(t, "claim-with-volumename.yaml")
		if got := c.WaitClaimBound(t, "default", "archive").Spec.VolumeName; got != "archive-volume" {
			t.Errorf("bound to %s", got)
		}
	})

	t.Run("Delete removes the backend volume; the claim waits for its pod (pvc-protection)", func(t *testing.T) {
		pvc := getClaim(t, c, "web-data")
		pv := e.volumeOf(t, pvc)
		node := e.nodeOf(pv)
		if err := pvcs.Delete(t.Context(), "web-data", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		cluster.Eventually(t, "claim terminating, held by pvc-protection", func(ctx context.Context) (bool, error) {
			p := getClaim(t, c, "web-data")
			return p.DeletionTimestamp != nil && slices.Contains(p.Finalizers, "kubernetes.io/pvc-protection"), nil
		})
		if pv := e.volumeOf(t, getClaim(t, c, "web-data")); pv.Status.Phase != corev1.VolumeBound {
			t.Errorf("the volume of a claim still in use is %s", pv.Status.Phase)
		}
		forceDeletePod(t, c, "web")
		cluster.WaitGone(t, "PV "+pv.Name, func(ctx context.Context) error {
			_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return err
		})
		if e.backendHas(t, node, pv.Spec.CSI.VolumeHandle) {
			t.Errorf("the driver on %s still has %s", node, pv.Spec.CSI.VolumeHandle)
		}
	})

	t.Run("Retain keeps the backend volume; a bound PV waits (pv-protection)", func(t *testing.T) {
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr("tether-local-retain"),
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if _, err := pvcs.Create(t.Context(), claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Create(t.Context(), pod("kept-app", "kept"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pv := e.volumeOf(t, c.WaitClaimBound(t, "default", "kept"))
		node := e.waitPodNode(t, "kept-app")
		// A bound PV is protected.
		if err := cs.CoreV1().PersistentVolumes().Delete(t.Context(), pv.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		cluster.Eventually(t, "PV terminating, held by pv-protection", func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return err == nil && p.DeletionTimestamp != nil && slices.Contains(p.Finalizers, "kubernetes.io/pv-protection"), nil
		})
		forceDeletePod(t, c, "kept-app")
		if err := pvcs.Delete(t.Context(), "kept", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Released, then pv-protection lets the deleted PV go; Retain keeps the backend volume.
		cluster.WaitGone(t, "PV "+pv.Name, func(ctx context.Context) error {
			_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return err
		})
		if !e.backendHas(t, node, pv.Spec.CSI.VolumeHandle) {
			t.Errorf("Retain: the driver on %s lost %s", node, pv.Spec.CSI.VolumeHandle)
		}
	})

	t.Run("binder leader failover", func(t *testing.T) {
		e.failover(t)
	})
}

func (e *env) failover(t *testing.T) {
	c := e.c
	leader := e.binderLeader(t)
	start := time.Now()
	leader.Kill()
	t.Logf("killed the binder leader (%s)", leader.LogPath)
	// A new static pair can only be bound by the other replica.
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "after-failover"}, Spec: corev1.PersistentVolumeSpec{
		StorageClassName: "manual", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/after"}}}}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "after-failover", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr("manual"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims("default").Create(t.Context(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitClaimBound(t, "default", "after-failover")
	took := time.Since(start)
	t.Logf("the standby took over and bound a new claim %s after the kill (lease duration 4s)", took.Round(100*time.Millisecond))
	if took > 4*time.Second+5*time.Second {
		t.Errorf("failover took %s, more than the lease duration and a margin", took)
	}
	e.checkNoDoubleBinding(t)
}

// binderLeader is the binder process that holds the Lease.
func (e *env) binderLeader(t *testing.T) *cluster.Process {
	t.Helper()
	holder := binderLeaseHolder(t, e.c)
	for _, b := range e.stack.Binders {
		if strings.Contains(cluster.Tail(b.LogPath, 100000), `"Became leader" logger="binder" lease="`+namespace+`/tether-binder" identity="`+holder+`"`) {
			return b
		}
	}
	t.Fatalf("no binder log names the leader %s", holder)
	return nil
}

// binderLeaseHolder waits for a binder to hold the Lease and returns the
// holder's identity.
func binderLeaseHolder(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	var holder string
	cluster.Eventually(t, "a binder leads", func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoordinationV1().Leases(namespace).Get(ctx, "tether-binder", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder = *l.Spec.HolderIdentity
		return true, nil
	})
	return holder
}

// checkNoDoubleBinding: no PV bound to two claims, no claim to two PVs.
func (e *env) checkNoDoubleBinding(t *testing.T) {
	t.Helper()
	pvs, err := e.c.Client.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byClaim := map[string]string{}
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.UID != "" && pv.Status.Phase == corev1.VolumeBound {
			k := ref.Namespace + "/" + ref.Name
			if other, ok := byClaim[k]; ok {
				t.Errorf("claim %s has two volumes: %s and %s", k, other, pv.Name)
			}
			byClaim[k] = pv.Name
		}
	}
	claims, err := e.c.Client.CoreV1().PersistentVolumeClaims("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, pvc := range claims.Items {
		if v := pvc.Spec.VolumeName; v != "" {
			if other, ok := seen[v]; ok {
				t.Errorf("volume %s is named by two claims: %s and %s", v, other, pvc.Name)
			}
			seen[v] = pvc.Name
		}
	}
}

func (e *env) volumeOf(t *testing.T, pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	t.Helper()
	pv, err := e.c.Client.CoreV1().PersistentVolumes().Get(t.Context(), pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

func (e *env) nodeOf(pv *corev1.PersistentVolume) string { return cluster.PVNode(pv) }

func (e *env) waitPodNode(t *testing.T, name string) string {
	t.Helper()
	var node string
	cluster.Eventually(t, "pod "+name+" scheduled", func(ctx context.Context) (bool, error) {
		p, err := e.c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	return node
}

// backendHas reports whether the local driver of a node keeps a volume:
// it keeps <root>/volumes/<id>.json for each.
func (e *env) backendHas(t *testing.T, node, id string) bool {
	t.Helper()
	for _, n := range e.stack.Nodes {
		if n.Name == node {
			_, err := os.Stat(filepath.Join(n.Root, "volumes", id+".json"))
			return err == nil
		}
	}
	t.Fatalf("no node %s", node)
	return false
}

func getClaim(t *testing.T, c *cluster.Cluster, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	p, err := c.Client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// forceDeletePod deletes a pod at once: there is no kubelet to confirm.
func forceDeletePod(t *testing.T, c *cluster.Cluster, name string) {
	t.Helper()
	zero := int64(0)
	if err := c.Client.CoreV1().Pods("default").Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
}

func pod(name, claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "example.com/app"}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
}

func ptr[T any](v T) *T { return &v }
