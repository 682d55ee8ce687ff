package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-csi/tether/test/cluster"
)

const (
	localDriver = cluster.LocalDriver
	localKey    = cluster.LocalKey
)

// startLocalCluster runs kube-scheduler, two fake nodes, and on each a
// local driver (10Gi) and a node-deployment provisioner publishing
// capacity, plus our binder.
func startLocalCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	c := cluster.Start(t, cluster.Options{Scheduler: true, Controllers: protectionControllers})
	cluster.StartLocalStack(t, c, cluster.StackOptions{})
	createCSIClass(t, c, "local", localDriver, "Delete", storagev1.VolumeBindingWaitForFirstConsumer)
	return c
}

func podWithClaim(name, claimName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}},
		},
	}
}

// capacityOf returns the published capacity of the local class on a node, or nil.
func capacityOf(ctx context.Context, cs kubernetes.Interface, node string) *resource.Quantity {
	list, err := cs.StorageV1().CSIStorageCapacities("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for _, o := range list.Items {
		if o.StorageClassName == "local" && o.NodeTopology != nil && o.NodeTopology.MatchLabels[localKey] == node {
			return o.Capacity
		}
	}
	return nil
}

func TestLocalVolumes(t *testing.T) {
	c := startLocalCluster(t)
	cs := c.Client
	pvcs, pods := cs.CoreV1().PersistentVolumeClaims("default"), cs.CoreV1().Pods("default")
	for _, n := range []string{"node-1", "node-2"} {
		eventually(t, "capacity published for "+n, func(ctx context.Context) (bool, error) {
			q := capacityOf(ctx, cs, n)
			return q != nil && q.Cmp(resource.MustParse("10Gi")) == 0, nil
		})
	}

	var node string
	t.Run("WaitForFirstConsumer pod is scheduled and its claim provisioned on its node", func(t *testing.T) {
		mustCreate(t, pvcs.Create, claim("data", "local", "4Gi"))
		mustCreate(t, pods.Create, podWithClaim("app", "data"))
		pvc := waitClaimBound(t, cs, "data")
		node = pvc.Annotations["volume.kubernetes.io/selected-node"]
		pv := getPV(t, cs, pvc.Spec.VolumeName)
		terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
		if len(terms) != 1 || terms[0].MatchExpressions[0].Key != localKey || terms[0].MatchExpressions[0].Values[0] != node {
			t.Errorf("PV node affinity %+v, want %s=%s", terms, localKey, node)
		}
		eventually(t, "pod scheduled", func(ctx context.Context) (bool, error) {
			p, err := pods.Get(ctx, "app", metav1.GetOptions{})
			return err == nil && p.Spec.NodeName != "", nil
		})
		if p, _ := pods.Get(t.Context(), "app", metav1.GetOptions{}); p.Spec.NodeName != node {
			t.Errorf("pod on %s, volume on %s", p.Spec.NodeName, node)
		}
		eventually(t, "capacity follows the new volume", func(ctx context.Context) (bool, error) {
			q := capacityOf(ctx, cs, node)
			return q != nil && q.Cmp(resource.MustParse("6Gi")) == 0, nil
		})
	})

	t.Run("a claim bigger than any node is never placed", func(t *testing.T) {
		mustCreate(t, pvcs.Create, claim("huge", "local", "12Gi"))
		mustCreate(t, pods.Create, podWithClaim("huge", "huge"))
		e := waitEvent(t, cs, "default", "huge", "FailedScheduling", "did not have enough free storage")
		t.Logf("scheduler: %s", e.Message)
		if pvc := getClaim(t, cs, "huge"); pvc.Spec.VolumeName != "" || pvc.Annotations["volume.kubernetes.io/selected-node"] != "" {
			t.Errorf("the huge claim was placed: %+v", pvc.Annotations)
		}
	})

	t.Run("a driver's ResourceExhausted reschedules instead of placing", func(t *testing.T) {
		// As a scheduler with stale capacity would: pick node-1 for 11Gi.
		pvc := claim("stale", "local", "11Gi")
		pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-1"}
		mustCreate(t, pvcs.Create, pvc)
		waitEvent(t, cs, "default", "stale", "ProvisioningFailed")
		eventually(t, "selected-node removed", func(ctx context.Context) (bool, error) {
			_, ok := getClaim(t, cs, "stale").Annotations["volume.kubernetes.io/selected-node"]
			return !ok, nil
		})
		if pvc := getClaim(t, cs, "stale"); pvc.Spec.VolumeName != "" {
			t.Errorf("the stale claim got a volume: %s", pvc.Spec.VolumeName)
		}
	})

	t.Run("deleting the claim frees the node's capacity", func(t *testing.T) {
		zero := int64(0)
		if err := pods.Delete(t.Context(), "app", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		pvName := getClaim(t, cs, "data").Spec.VolumeName
		deleteClaim(t, cs, "data")
		waitGone(t, func(ctx context.Context) error {
			_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
			return err
		})
		eventually(t, "capacity back to 10Gi", func(ctx context.Context) (bool, error) {
			q := capacityOf(ctx, cs, node)
			return q != nil && q.Cmp(resource.MustParse("10Gi")) == 0, nil
		})
	})
}
