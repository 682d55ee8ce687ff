package integration

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tether-csi/tether/test/cluster"
)

// TestHarnessIsReal writes storage objects to the real API server and reads
// them back, with the defaulting and validation only a real server does.
func TestHarnessIsReal(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	ctx := t.Context()

	sc := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "manual"},
		Provisioner: "kubernetes.io/no-provisioner",
	}
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, hostPathPV("pv-1", "manual", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim("claim-1", "manual", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	gotSC, err := c.Client.StorageV1().StorageClasses().Get(ctx, "manual", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The server defaults these; a fake clientset would leave them nil.
	if gotSC.ReclaimPolicy == nil || *gotSC.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("class reclaimPolicy = %v, want the server default Delete", gotSC.ReclaimPolicy)
	}
	if gotSC.VolumeBindingMode == nil || *gotSC.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("class volumeBindingMode = %v, want the server default Immediate", gotSC.VolumeBindingMode)
	}
	pv, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, "pv-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.VolumeMode == nil || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("pv volumeMode = %v, want the server default Filesystem", pv.Spec.VolumeMode)
	}
	if pv.UID == "" || pv.ResourceVersion == "" {
		t.Errorf("pv has no uid or resourceVersion: %+v", pv.ObjectMeta)
	}
	pvc, err := c.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "claim-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pvc.Spec.Resources.Requests.Storage().String(); got != "1Gi" {
		t.Errorf("claim request = %s, want 1Gi", got)
	}

	// Validation is real too: a PV without capacity is refused.
	bad := hostPathPV("pv-bad", "manual", "1Gi")
	bad.Spec.Capacity = nil
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, bad, metav1.CreateOptions{}); err == nil {
		t.Error("the API server accepted a PV without capacity")
	}
}

// TestUpstreamBinderBindsStaticPair runs kube-controller-manager with only the
// persistentvolume-binder-controller: the upstream binder, our oracle.
func TestUpstreamBinderBindsStaticPair(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: []string{"persistentvolume-binder-controller"}})
	ctx := t.Context()

	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, hostPathPV("pv-1", "", "2Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim("claim-1", "", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var pvc *corev1.PersistentVolumeClaim
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		pvc, err = c.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "claim-1", metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, nil
	})
	if err != nil {
		t.Fatalf("claim not Bound: phase %q: %v", pvc.Status.Phase, err)
	}
	if pvc.Spec.VolumeName != "pv-1" {
		t.Errorf("claim volumeName = %q, want pv-1", pvc.Spec.VolumeName)
	}
	if pvc.Annotations["pv.kubernetes.io/bind-completed"] != "yes" {
		t.Errorf("claim annotations = %v, want bind-completed", pvc.Annotations)
	}
	pv, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, "pv-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Status.Phase != corev1.VolumeBound || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		t.Errorf("pv phase %q claimRef %+v, want Bound to claim %s", pv.Status.Phase, pv.Spec.ClaimRef, pvc.UID)
	}
}

func hostPathPV(name, class, size string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              class,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name},
			},
		},
	}
}

func claim(name, class, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			},
		},
	}
}
