package integration

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// TestControllerPublishReadOnly: with --controller-publish-readonly, the
// PV saved for a claim whose only access mode is ReadOnlyMany has
// csi.readOnly, and no other PV has; without the flag none has.
func TestControllerPublishReadOnly(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	startBinder(t, c)
	const withFlag, without = "ro.csi.tether.dev", "rw.csi.tether.dev"
	startProvisioner(t, c, "flag", startMock(t, c, withFlag, "").Socket, "--controller-publish-readonly")
	startProvisioner(t, c, "noflag", startMock(t, c, without, "").Socket)
	createCSIClass(t, c, "flag", withFlag, "Delete", storagev1.VolumeBindingImmediate)
	createCSIClass(t, c, "noflag", without, "Delete", storagev1.VolumeBindingImmediate)

	rox, rwo, rwx := corev1.ReadOnlyMany, corev1.ReadWriteOnce, corev1.ReadWriteMany
	cases := []struct {
		class string
		modes []corev1.PersistentVolumeAccessMode
		want  bool
	}{
		{"flag", []corev1.PersistentVolumeAccessMode{rox}, true},
		{"flag", []corev1.PersistentVolumeAccessMode{rwo, rox}, false},
		{"flag", []corev1.PersistentVolumeAccessMode{rox, rwx}, false},
		{"flag", []corev1.PersistentVolumeAccessMode{rwo}, false},
		{"noflag", []corev1.PersistentVolumeAccessMode{rox}, false},
	}
	pvcs := c.Client.CoreV1().PersistentVolumeClaims("default")
	for i, tc := range cases {
		pvc := claim(fmt.Sprintf("ro-%d", i), tc.class, "1Gi")
		pvc.Spec.AccessModes = tc.modes
		mustCreate(t, pvcs.Create, pvc)
	}
	for i, tc := range cases {
		pvc := waitClaimBound(t, c.Client, fmt.Sprintf("ro-%d", i))
		pv := getPV(t, c.Client, pvc.Spec.VolumeName)
		if pv.Spec.CSI == nil || pv.Spec.CSI.ReadOnly != tc.want {
			t.Errorf("class %s, access modes %v: CSI source %+v, want readOnly %v", tc.class, tc.modes, pv.Spec.CSI, tc.want)
		}
	}
}
