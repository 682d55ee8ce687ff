package integration

import (
	"testing"

	"github.com/tether-csi/tether/test/cluster"
)

func TestBinderStaticBind(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	startBinder(t, c)
	cs := c.Client
	mustCreate(t, cs.CoreV1().PersistentVolumes().Create, hostPathPV("pv-1", "", "2Gi"))
	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("claim-1", "", "1Gi"))
	pvc := waitClaimBound(t, cs, "claim-1")
	if pvc.Spec.VolumeName != "pv-1" || pvc.Annotations["pv.kubernetes.io/bind-completed"] != "yes" ||
		pvc.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
		t.Errorf("claim = %s %v", pvc.Spec.VolumeName, pvc.Annotations)
	}
	if got := pvc.Status.Capacity.Storage().String(); got != "2Gi" {
		t.Errorf("claim capacity = %s, want the volume's 2Gi", got)
	}
	pv := waitVolumePhase(t, cs, "pv-1", "Bound")
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID || pv.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
		t.Errorf("pv claimRef %+v annotations %v", pv.Spec.ClaimRef, pv.Annotations)
	}
}
