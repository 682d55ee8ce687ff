package integration

import (
	"context"
	"slices"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/test/cluster"
)

// slowCreate makes the mock driver create the first volume, then take 4
// seconds to answer, past the provisioner's 1s timeout: the window in which
// external-provisioner leaks (EP#486). Later calls answer at once.
const slowCreate = `globals: var slowDone = false;
createVolumeEnd: |
  if (!slowDone) {
    slowDone = true;
    var start = new Date().getTime();
    while (new Date().getTime() - start < 4000) {}
  }
  OK;
`

// TestProvisionerRestartMidCreateLeaksNothing kills the provisioner while
// CreateVolume is in flight, deletes the claim, and restarts it: the driver
// must end with no volume, and the claim must be gone.
func TestProvisionerRestartMidCreateLeaksNothing(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	pvcs := cs.CoreV1().PersistentVolumeClaims("default")
	mock := startMock(t, c, mockName, slowCreate)
	prov := startProvisioner(t, c, "mock", mock.Socket, "--timeout=1s", "--retry-interval-start=10s")
	startBinder(t, c)
	createCSIClass(t, c, "slow", mockName, "Delete", storagev1.VolumeBindingImmediate)
	mustCreate(t, pvcs.Create, claim("slow", "slow", "1Gi"))

	// The first CreateVolume times out while the driver still makes the
	// volume; kill the provisioner before it retries.
	eventually(t, "CreateVolume timed out", func(ctx context.Context) (bool, error) {
		return strings.Contains(cluster.Tail(prov.LogPath, 1000), "CreateVolume failed"), nil
	})
	prov.Kill()
	if !slices.Contains(getClaim(t, cs, "slow").Finalizers, provisioner.FinalizerInFlight) {
		t.Fatal("no in-flight record on the claim while CreateVolume was in flight")
	}
	t.Logf("provisioner killed mid-CreateVolume; driver volumes: %v", mock.Volumes(t))
	deleteClaim(t, cs, "slow")
	if err := prov.Start(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, func(ctx context.Context) error {
		_, err := pvcs.Get(ctx, "slow", metav1.GetOptions{})
		return err
	})
	eventually(t, "driver has no volume", func(ctx context.Context) (bool, error) {
		return len(mock.Volumes(t)) == 0, nil
	})
	pvs, err := cs.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pvs.Items) != 0 {
		t.Errorf("%d PVs left", len(pvs.Items))
	}
	t.Logf("after the restart: claim gone, driver volumes %d, PVs %d", len(mock.Volumes(t)), len(pvs.Items))
}
