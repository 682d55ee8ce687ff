package integration

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-csi/tether/test/cluster"
)

// The binder caches only what it reads of claims and volumes (its
// informers' transform), and writes merge patches of what it changes: a
// field it does not read survives its writes on a real API server. Were a
// write an update of the slim cached copy, the claim's labels, others'
// annotations, its limits and status conditions, and the volume's status
// reason would be gone after the bind or the release.
func TestBinderKeepsWhatItDoesNotRead(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	ctx := t.Context()
	pvs, pvcs := cs.CoreV1().PersistentVolumes(), cs.CoreV1().PersistentVolumeClaims("default")

	pv := hostPathPV("keep-pv", "keep", "1Gi")
	pv.Labels = map[string]string{"team": "storage"}
	pv.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"kind":"PersistentVolume"}`, "example.com/owner": "ops"}
	pv.Spec.MountOptions = []string{"noatime", "nodiratime"}
	pv = mustCreate(t, pvs.Create, pv)
	pv.Status.Phase, pv.Status.Reason = corev1.VolumeAvailable, "ReviewedByOps"
	if _, err := pvs.UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := claim("keep", "keep", "1Gi")
	pvc.Labels = map[string]string{"app": "db"}
	pvc.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"kind":"PersistentVolumeClaim"}`, "example.com/owner": "ops"}
	pvc.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	pvc = mustCreate(t, pvcs.Create, pvc)
	// Unused is KCM 1.37's (beta, on by default): whether a pod uses the
	// claim, written by another controller; the binder must keep it.
	pvc.Status.Conditions = []corev1.PersistentVolumeClaimCondition{
		{Type: "example.com/Reviewed", Status: corev1.ConditionTrue},
		{Type: "Unused", Status: corev1.ConditionTrue, Reason: "NoPodsUsingClaim", LastTransitionTime: metav1.Now()},
	}
	if _, err := pvcs.UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	startBinder(t, c)
	bound := waitClaimBound(t, cs, "keep")
	if bound.Spec.VolumeName != "keep-pv" || bound.Annotations["pv.kubernetes.io/bind-completed"] != "yes" {
		t.Fatalf("claim = %s %v", bound.Spec.VolumeName, bound.Annotations)
	}
	checkClaimKept(t, bound, pvc)
	checkVolumeKept(t, waitVolumePhase(t, cs, "keep-pv", corev1.VolumeBound), pv)

	// The release: the claim goes, the volume's phase is written.
	deleteClaim(t, cs, "keep")
	checkVolumeKept(t, waitVolumePhase(t, cs, "keep-pv", corev1.VolumeReleased), pv)
	eventually(t, "the volume's claimRef kept after the release", func(ctx context.Context) (bool, error) {
		got, err := pvs.Get(ctx, "keep-pv", metav1.GetOptions{})
		return err == nil && got.Spec.ClaimRef != nil && got.Spec.ClaimRef.UID == bound.UID, err
	})
}

func checkClaimKept(t *testing.T, got, want *corev1.PersistentVolumeClaim) {
	t.Helper()
	if !reflect.DeepEqual(got.Labels, want.Labels) || got.Annotations["example.com/owner"] != "ops" ||
		got.Annotations["kubectl.kubernetes.io/last-applied-configuration"] != want.Annotations["kubectl.kubernetes.io/last-applied-configuration"] {
		t.Errorf("the claim lost labels or annotations: labels %v, annotations %v", got.Labels, got.Annotations)
	}
	if q := got.Spec.Resources.Limits[corev1.ResourceStorage]; q.String() != "2Gi" {
		t.Errorf("the claim lost its limit: %v", got.Spec.Resources.Limits)
	}
	var types []corev1.PersistentVolumeClaimConditionType
	for _, c := range got.Status.Conditions {
		types = append(types, c.Type)
	}
	if !reflect.DeepEqual(types, []corev1.PersistentVolumeClaimConditionType{"example.com/Reviewed", "Unused"}) {
		t.Errorf("the claim lost its conditions: %+v", got.Status.Conditions)
	}
}

func checkVolumeKept(t *testing.T, got, want *corev1.PersistentVolume) {
	t.Helper()
	if !reflect.DeepEqual(got.Labels, want.Labels) || got.Annotations["example.com/owner"] != "ops" ||
		got.Annotations["kubectl.kubernetes.io/last-applied-configuration"] == "" {
		t.Errorf("the volume lost labels or annotations: labels %v, annotations %v", got.Labels, got.Annotations)
	}
	if !reflect.DeepEqual(got.Spec.MountOptions, want.Spec.MountOptions) {
		t.Errorf("the volume lost its mount options: %v", got.Spec.MountOptions)
	}
	if got.Status.Reason != "ReviewedByOps" {
		t.Errorf("the volume lost its status reason: %+v", got.Status)
	}
	if got.Status.LastPhaseTransitionTime == nil {
		t.Errorf("the volume has no lastPhaseTransitionTime: %+v", got.Status)
	}
}

// A field of a newer API server than the binder's client knows survives
// the binder's writes: a claim's status.healthStatus (Kubernetes 1.37,
// alpha CSIVolumeHealth), which client-go v0.36 reads as nothing, is kept
// through the bind, whose status write is a merge patch of the phase. An
// update would have sent the status without it, and the API server would
// have dropped it (as KCM 1.36's binder does against a 1.37 API server).
// An API server that does not keep the field (before 1.37) skips the test;
// make test-versions runs it on 1.37.
func TestBinderKeepsFieldsItsClientDoesNotKnow(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers,
		APIServerArgs: map[string][]string{"feature-gates": {"CSIVolumeHealth=true"}}})
	cs := c.Client
	ctx := t.Context()
	mustCreate(t, cs.CoreV1().PersistentVolumes().Create, hostPathPV("health-pv", "health", "1Gi"))
	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("health", "health", "1Gi"))
	const health = `{"status":{"healthStatus":{"healthConditions":[{"status":"Degraded","reason":"SlowDisk","message":"reported by the driver"}]}}}`
	if _, err := cs.CoreV1().PersistentVolumeClaims("default").Patch(ctx, "health", types.MergePatchType, []byte(health), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if got := rawHealth(t, c, "health"); got == nil {
		t.Skip("this API server does not keep a claim's status.healthStatus (Kubernetes 1.37 with CSIVolumeHealth has it)")
	}
	startBinder(t, c)
	bound := waitClaimBound(t, cs, "health")
	if bound.Spec.VolumeName != "health-pv" {
		t.Fatalf("claim bound to %q", bound.Spec.VolumeName)
	}
	got := rawHealth(t, c, "health")
	conds, _ := got["healthConditions"].([]any)
	if len(conds) != 1 || conds[0].(map[string]any)["reason"] != "SlowDisk" {
		t.Errorf("the claim's status.healthStatus after the bind: %v", got)
	}
}

// rawHealth is the claim's status.healthStatus as the API server returns
// it (JSON, past the client's types), nil when it has none.
func rawHealth(t *testing.T, c *cluster.Cluster, name string) map[string]any {
	t.Helper()
	raw, err := c.Client.CoreV1().RESTClient().Get().Namespace("default").Resource("persistentvolumeclaims").Name(name).DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Status struct {
			HealthStatus map[string]any `json:"healthStatus"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	return obj.Status.HealthStatus
}
