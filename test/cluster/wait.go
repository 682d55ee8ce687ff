package cluster

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitTimeout bounds every wait of this file.
const WaitTimeout = 90 * time.Second

// Eventually polls cond until it holds, or fails the test at the deadline.
func Eventually(t T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, WaitTimeout, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// WaitClaimBound waits for a claim to be Bound and returns it.
func (c *Cluster) WaitClaimBound(t T, namespace, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	var pvc *corev1.PersistentVolumeClaim
	Eventually(t, "claim "+namespace+"/"+name+" Bound", func(ctx context.Context) (bool, error) {
		var err error
		pvc, err = c.Client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, nil
	})
	return pvc
}

// WaitVolumePhase waits for a PV to reach a phase and returns it.
func (c *Cluster) WaitVolumePhase(t T, name string, phase corev1.PersistentVolumePhase) *corev1.PersistentVolume {
	t.Helper()
	var pv *corev1.PersistentVolume
	Eventually(t, "volume "+name+" "+string(phase), func(ctx context.Context) (bool, error) {
		var err error
		pv, err = c.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && pv.Status.Phase == phase, nil
	})
	return pv
}

// WaitGone waits until get says NotFound.
func WaitGone(t T, what string, get func(ctx context.Context) error) {
	t.Helper()
	Eventually(t, what+" gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(get(ctx)), nil
	})
}
