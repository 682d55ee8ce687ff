package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/test/cluster"
)

const mockName = "mock.csi.tether.dev"

// TestProvisioner runs our provisioner beside the csi-test mock driver,
// with our binder, on a real control plane.
func TestProvisioner(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	pvcs := cs.CoreV1().PersistentVolumeClaims("default")
	mock := startMock(t, c, mockName, "", "-enable-topology")
	startProvisioner(t, c, "mock", mock.Socket)
	startBinder(t, c)

	t.Run("Immediate class gives a Bound claim and a pre-bound PV", func(t *testing.T) {
		createCSIClass(t, c, "imm", mockName, "Delete", storagev1.VolumeBindingImmediate)
		mustCreate(t, pvcs.Create, claim("imm", "imm", "1Gi"))
		pvc := waitClaimBound(t, cs, "imm")
		pv := getPV(t, cs, pvc.Spec.VolumeName)
		if pv.Name != "pvc-"+string(pvc.UID) {
			t.Errorf("PV name %s, want pvc-<claim UID>", pv.Name)
		}
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
			t.Errorf("claimRef %+v, want the claim's UID", pv.Spec.ClaimRef)
		}
		if !slices.Contains(pv.Finalizers, "external-provisioner.volume.kubernetes.io/finalizer") {
			t.Errorf("finalizers %v lack external-provisioner's", pv.Finalizers)
		}
		if pv.Annotations["pv.kubernetes.io/provisioned-by"] != mockName {
			t.Errorf("provisioned-by = %q", pv.Annotations["pv.kubernetes.io/provisioned-by"])
		}
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != mockName || pv.Spec.CSI.VolumeHandle == "" {
			t.Fatalf("CSI source %+v", pv.Spec.CSI)
		}
		if !slices.Contains(mock.Volumes(t), pv.Spec.CSI.VolumeHandle) {
			t.Errorf("the driver does not list %s", pv.Spec.CSI.VolumeHandle)
		}
		eventually(t, "in-flight record removed", func(ctx context.Context) (bool, error) {
			return !slices.Contains(getClaim(t, cs, "imm").Finalizers, provisioner.FinalizerInFlight), nil
		})

		t.Run("deleting the claim deletes the volume and the PV", func(t *testing.T) {
			deleteClaim(t, cs, "imm")
			waitGone(t, func(ctx context.Context) error {
				_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
				return err
			})
			if slices.Contains(mock.Volumes(t), pv.Spec.CSI.VolumeHandle) {
				t.Errorf("the driver still lists %s", pv.Spec.CSI.VolumeHandle)
			}
		})
	})

	t.Run("Retain keeps the PV and the backend volume", func(t *testing.T) {
		createCSIClass(t, c, "keep", mockName, "Retain", storagev1.VolumeBindingImmediate)
		mustCreate(t, pvcs.Create, claim("keep", "keep", "1Gi"))
		pvc := waitClaimBound(t, cs, "keep")
		pv := getPV(t, cs, pvc.Spec.VolumeName)
		// The library saves every PV with the deletion finalizer, as EP
		// does, and takes it off a Retain PV at its next sync, once the
		// claim's in-flight record is settled (LibraryClient).
		eventually(t, "a Retain PV without the deletion finalizer", func(ctx context.Context) (bool, error) {
			pv = getPV(t, cs, pv.Name)
			return !slices.Contains(pv.Finalizers, "external-provisioner.volume.kubernetes.io/finalizer"), nil
		})
		deleteClaim(t, cs, "keep")
		waitVolumePhase(t, cs, pv.Name, corev1.VolumeReleased)
		if !slices.Contains(mock.Volumes(t), pv.Spec.CSI.VolumeHandle) {
			t.Errorf("the backend volume of a Retain PV is gone")
		}
	})

	t.Run("WaitForFirstConsumer passes the selected node's topology", func(t *testing.T) {
		const key, value = "io.kubernetes.storage.mock/node", "some-mock-node"
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mock-node", Labels: map[string]string{key: value}}}
		mustCreate(t, cs.CoreV1().Nodes().Create, node)
		csiNode := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "mock-node"}, Spec: storagev1.CSINodeSpec{
			Drivers: []storagev1.CSINodeDriver{{Name: mockName, NodeID: "mock-node", TopologyKeys: []string{key}}}}}
		mustCreate(t, cs.StorageV1().CSINodes().Create, csiNode)
		createCSIClass(t, c, "late", mockName, "Delete", storagev1.VolumeBindingWaitForFirstConsumer)
		mustCreate(t, pvcs.Create, claim("late", "late", "1Gi"))
		waitEvent(t, cs, "default", "late", "WaitForFirstConsumer")
		patch := []byte(`{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"mock-node"}}}`)
		if _, err := pvcs.Patch(t.Context(), "late", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		pv := getPV(t, cs, waitClaimBound(t, cs, "late").Spec.VolumeName)
		terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
		if len(terms) != 1 || terms[0].MatchExpressions[0].Key != key || terms[0].MatchExpressions[0].Values[0] != value {
			t.Errorf("node affinity %+v, want %s=%s", terms, key, value)
		}
		// The mock logs each request: the CreateVolume for this claim must
		// carry the node's segment as its requirement.
		var sawTopology bool
		for _, line := range strings.Split(cluster.Tail(mock.Proc.LogPath, 100000), "\n") {
			if strings.Contains(line, "CreateVolume") && strings.Contains(line, pv.Name) {
				sawTopology = strings.Contains(line, `"accessibility_requirements":{"requisite":[{"segments":{"`+key+`":"`+value+`"}}]`)
			}
		}
		if !sawTopology {
			t.Errorf("the CreateVolume request for %s did not carry the node's topology", pv.Name)
		}
	})

	t.Run("a deleted PV with Delete is still cleaned up", func(t *testing.T) {
		createCSIClass(t, c, "gone", mockName, "Delete", storagev1.VolumeBindingImmediate)
		mustCreate(t, pvcs.Create, claim("gone", "gone", "1Gi"))
		pvc := waitClaimBound(t, cs, "gone")
		pv := getPV(t, cs, pvc.Spec.VolumeName)
		if err := cs.CoreV1().PersistentVolumes().Delete(t.Context(), pv.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleteClaim(t, cs, "gone")
		waitGone(t, func(ctx context.Context) error {
			_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return err
		})
		if slices.Contains(mock.Volumes(t), pv.Spec.CSI.VolumeHandle) {
			t.Errorf("the driver still lists %s", pv.Spec.CSI.VolumeHandle)
		}
	})
}

// TestProvisionerFinalError: a driver that refuses every CreateVolume gives
// a ProvisioningFailed event with its message, and no PV.
func TestProvisionerFinalError(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	const name = "broken.csi.tether.dev"
	mock := startMock(t, c, name, "createVolumeStart: INVALIDARGUMENT\n")
	startProvisioner(t, c, "broken", mock.Socket)
	startBinder(t, c)
	createCSIClass(t, c, "broken", name, "Delete", storagev1.VolumeBindingImmediate)
	mustCreate(t, c.Client.CoreV1().PersistentVolumeClaims("default").Create, claim("broken", "broken", "1Gi"))
	e := waitEvent(t, c.Client, "default", "broken", "ProvisioningFailed")
	if !strings.Contains(e.Message, "InvalidArgument") {
		t.Errorf("event message %q does not carry the driver's error", e.Message)
	}
	pvs, err := c.Client.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pvs.Items) != 0 {
		t.Errorf("%d PVs exist after a final error", len(pvs.Items))
	}
	// The record stays while the claim waits; once the claim is deleted it
	// goes, with no clean-up call: every CreateVolume answered final.
	expectInFlight(t, c.Client, "broken")
	deleteClaimAndWaitCleanedUp(t, c.Client, "broken")

	// Deleted with its class, as a test suite deletes its namespace's claims
	// and class (issue 33, defect 7): it goes at once too, with no
	// clean-up that needs the class (that one was held 10 minutes, then
	// given up with VolumeCleanupAbandoned).
	createCSIClass(t, c, "broken-gone", name, "Delete", storagev1.VolumeBindingImmediate)
	mustCreate(t, c.Client.CoreV1().PersistentVolumeClaims("default").Create, claim("broken-gone", "broken-gone", "1Gi"))
	waitEvent(t, c.Client, "default", "broken-gone", "ProvisioningFailed")
	expectInFlight(t, c.Client, "broken-gone")
	if err := c.Client.StorageV1().StorageClasses().Delete(t.Context(), "broken-gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	deleteClaimAndWaitCleanedUp(t, c.Client, "broken-gone")
	t.Logf("the claim deleted with its class let go in %s", time.Since(start).Round(time.Millisecond))
	events, err := c.Client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "broken-gone").String()})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == provisioner.ReasonVolumeCleanupAbandoned || e.Reason == "ProvisioningCleanupFailed" {
			t.Errorf("event %s on a claim whose every CreateVolume answered final: %s", e.Reason, e.Message)
		}
	}
}

func waitGone(t *testing.T, get func(context.Context) error) {
	t.Helper()
	eventually(t, "object gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(get(ctx)), nil
	})
}
