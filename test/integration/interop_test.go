package integration

import (
	"context"
	"fmt"
	"testing"

	storagev1 "k8s.io/api/storage/v1"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/test/cluster"
)

const interopClaims = 5

// TestInteropOurProvisionerWithKCMBinder: KCM's binder annotates and binds,
// our provisioner provisions.
func TestInteropOurProvisionerWithKCMBinder(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: append([]string{"persistentvolume-binder-controller"}, protectionControllers...)})
	mock := startMock(t, c, mockName, "")
	startProvisioner(t, c, "mock", mock.Socket)
	provisionAndBind(t, c)
}

// TestInteropUpstreamProvisionerWithOurBinder: the upstream
// external-provisioner v6.4.0 provisions, our binder annotates and binds.
func TestInteropUpstreamProvisionerWithOurBinder(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	mock := startMock(t, c, mockName, "")
	ep, err := cluster.Tool("csi-provisioner")
	if err != nil {
		t.Fatal(err)
	}
	c.Run(t, cluster.ProcessOptions{Name: "external-provisioner", Path: ep,
		Args: []string{"--kubeconfig=" + c.Kubeconfig, "--csi-address=" + mock.Socket, "--leader-election=false", "-v=3"}})
	startBinder(t, c)
	provisionAndBind(t, c)
}

func provisionAndBind(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	createCSIClass(t, c, "interop", mockName, "Delete", storagev1.VolumeBindingImmediate)
	for i := range interopClaims {
		mustCreate(t, c.Client.CoreV1().PersistentVolumeClaims("default").Create, claim(fmt.Sprintf("interop-%d", i), "interop", "1Gi"))
	}
	for i := range interopClaims {
		pvc := waitClaimBound(t, c.Client, fmt.Sprintf("interop-%d", i))
		pv := getPV(t, c.Client, pvc.Spec.VolumeName)
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID || pv.Status.Phase != "Bound" {
			t.Errorf("%s: PV %s claimRef %+v phase %s", pvc.Name, pv.Name, pv.Spec.ClaimRef, pv.Status.Phase)
		}
		// Whichever binder bound it, the in-flight record goes (KCM's
		// binder leaves it to our provisioner's reconciler).
		eventually(t, pvc.Name+" without the in-flight record", func(context.Context) (bool, error) {
			return !inflight.Holds(getClaim(t, c.Client, pvc.Name)), nil
		})
	}
}
