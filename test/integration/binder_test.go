package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-csi/tether/test/cluster"
)

const noProvisioner = "kubernetes.io/no-provisioner"

var protectionControllers = []string{"persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller"}

// TestBinder runs the binder's scenarios on one control plane and one
// binder process. Each scenario uses classes of its own, so they do not see
// each other's volumes.
func TestBinder(t *testing.T) {
	// KCM runs only the protection controllers that every cluster has, so
	// deletions behave as they do there.
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	startBinder(t, c)
	cs := c.Client
	pvs, pvcs := cs.CoreV1().PersistentVolumes(), cs.CoreV1().PersistentVolumeClaims("default")

	t.Run("static bind", func(t *testing.T) {
		mustCreate(t, pvs.Create, hostPathPV("static-pv", "", "2Gi"))
		mustCreate(t, pvcs.Create, claim("static", "", "1Gi"))
		pvc := waitClaimBound(t, cs, "static")
		if pvc.Spec.VolumeName != "static-pv" || pvc.Annotations["pv.kubernetes.io/bind-completed"] != "yes" ||
			pvc.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
			t.Errorf("claim = %s %v", pvc.Spec.VolumeName, pvc.Annotations)
		}
		if got := pvc.Status.Capacity.Storage().String(); got != "2Gi" {
			t.Errorf("claim capacity = %s, want the volume's 2Gi", got)
		}
		pv := waitVolumePhase(t, cs, "static-pv", corev1.VolumeBound)
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID || pv.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
			t.Errorf("pv claimRef %+v annotations %v", pv.Spec.ClaimRef, pv.Annotations)
		}
	})

	t.Run("smallest fit among three sizes", func(t *testing.T) {
		for _, size := range []string{"10Gi", "3Gi", "5Gi"} {
			mustCreate(t, pvs.Create, hostPathPV("fit-"+strings.ToLower(size), "fit", size))
		}
		mustCreate(t, pvcs.Create, claim("fit", "fit", "2Gi"))
		if got := waitClaimBound(t, cs, "fit").Spec.VolumeName; got != "fit-3gi" {
			t.Errorf("bound to %s, want fit-3gi", got)
		}
	})

	t.Run("pre-bound by claimRef without UID", func(t *testing.T) {
		small := hostPathPV("prebound-small", "pre", "1Gi")
		mustCreate(t, pvs.Create, small)
		big := hostPathPV("prebound-big", "pre", "5Gi")
		big.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "prebound"}
		mustCreate(t, pvs.Create, big)
		mustCreate(t, pvcs.Create, claim("prebound", "pre", "1Gi"))
		pvc := waitClaimBound(t, cs, "prebound")
		if pvc.Spec.VolumeName != "prebound-big" {
			t.Fatalf("bound to %s, want the pre-bound prebound-big", pvc.Spec.VolumeName)
		}
		pv := getPV(t, cs, "prebound-big")
		if pv.Spec.ClaimRef.UID != pvc.UID {
			t.Errorf("pv claimRef UID %q, want %q", pv.Spec.ClaimRef.UID, pvc.UID)
		}
		if _, ok := pv.Annotations["pv.kubernetes.io/bound-by-controller"]; ok {
			t.Errorf("a user's pre-binding got bound-by-controller: %v", pv.Annotations)
		}
	})

	t.Run("claim with volumeName", func(t *testing.T) {
		mustCreate(t, pvs.Create, hostPathPV("named-1", "named", "1Gi"))
		mustCreate(t, pvs.Create, hostPathPV("named-2", "named", "8Gi"))
		pvc := claim("named", "named", "1Gi")
		pvc.Spec.VolumeName = "named-2"
		mustCreate(t, pvcs.Create, pvc)
		got := waitClaimBound(t, cs, "named")
		if got.Spec.VolumeName != "named-2" {
			t.Errorf("bound to %s, want named-2", got.Spec.VolumeName)
		}
		if _, ok := got.Annotations["pv.kubernetes.io/bound-by-controller"]; ok {
			t.Errorf("the user's volumeName got bound-by-controller: %v", got.Annotations)
		}
		waitVolumePhase(t, cs, "named-2", corev1.VolumeBound)
	})

	t.Run("label selector", func(t *testing.T) {
		plain := hostPathPV("sel-plain", "sel", "1Gi")
		mustCreate(t, pvs.Create, plain)
		fast := hostPathPV("sel-fast", "sel", "4Gi")
		fast.Labels = map[string]string{"speed": "fast"}
		mustCreate(t, pvs.Create, fast)
		pvc := claim("sel", "sel", "1Gi")
		pvc.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"speed": "fast"}}
		mustCreate(t, pvcs.Create, pvc)
		if got := waitClaimBound(t, cs, "sel").Spec.VolumeName; got != "sel-fast" {
			t.Errorf("bound to %s, want sel-fast", got)
		}
	})

	t.Run("volumeMode mismatch stays Pending", func(t *testing.T) {
		createClass(t, cs, "mode", noProvisioner, storagev1.VolumeBindingImmediate, false)
		block := hostPathPV("mode-block", "mode", "1Gi")
		block.Spec.VolumeMode = ptrTo(corev1.PersistentVolumeBlock)
		mustCreate(t, pvs.Create, block)
		mustCreate(t, pvcs.Create, claim("mode", "mode", "1Gi"))
		e := waitEvent(t, cs, "default", "mode", "FailedBinding")
		t.Logf("event: %s", e.Message)
		if pvc := getClaim(t, cs, "mode"); pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
			t.Errorf("claim phase %s volume %q, want Pending and unbound", pvc.Status.Phase, pvc.Spec.VolumeName)
		}
		if pv := getPV(t, cs, "mode-block"); pv.Spec.ClaimRef != nil {
			t.Errorf("block volume was claimed: %+v", pv.Spec.ClaimRef)
		}
	})

	t.Run("two claims race one PV", func(t *testing.T) {
		createClass(t, cs, "race", noProvisioner, storagev1.VolumeBindingImmediate, false)
		mustCreate(t, pvs.Create, hostPathPV("race-pv", "race", "1Gi"))
		var wg sync.WaitGroup
		for _, name := range []string{"race-a", "race-b"} {
			wg.Go(func() {
				if _, err := pvcs.Create(t.Context(), claim(name, "race", "1Gi"), metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		pv := waitVolumePhase(t, cs, "race-pv", corev1.VolumeBound)
		winner := pv.Spec.ClaimRef.Name
		loser := map[string]string{"race-a": "race-b", "race-b": "race-a"}[winner]
		if got := waitClaimBound(t, cs, winner).Spec.VolumeName; got != "race-pv" {
			t.Errorf("winner %s bound to %s", winner, got)
		}
		waitEvent(t, cs, "default", loser, "FailedBinding")
		if pvc := getClaim(t, cs, loser); pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
			t.Errorf("loser %s: phase %s volume %q, want Pending", loser, pvc.Status.Phase, pvc.Spec.VolumeName)
		}
	})

	t.Run("PV deleted under a bound claim makes it Lost", func(t *testing.T) {
		mustCreate(t, pvs.Create, hostPathPV("lost-pv", "lost", "1Gi"))
		mustCreate(t, pvcs.Create, claim("lost", "lost", "1Gi"))
		waitClaimBound(t, cs, "lost")
		// PV protection keeps a bound volume; an administrator who forces it
		// away removes the finalizer.
		if err := pvs.Delete(t.Context(), "lost-pv", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := pvs.Patch(t.Context(), "lost-pv", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitClaimPhase(t, cs, "lost", corev1.ClaimLost)
		waitEvent(t, cs, "default", "lost", "ClaimLost")
	})

	t.Run("claim deleted with Retain makes the PV Released", func(t *testing.T) {
		mustCreate(t, pvs.Create, hostPathPV("retain-pv", "retain", "1Gi"))
		mustCreate(t, pvcs.Create, claim("retain", "retain", "1Gi"))
		waitClaimBound(t, cs, "retain")
		deleteClaim(t, cs, "retain")
		pv := waitVolumePhase(t, cs, "retain-pv", corev1.VolumeReleased)
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "retain" {
			t.Errorf("a Released Retain volume keeps its claimRef, got %+v", pv.Spec.ClaimRef)
		}
	})

	t.Run("external class gets both provisioner annotations", func(t *testing.T) {
		createClass(t, cs, "external", "example.com/ext", storagev1.VolumeBindingImmediate, false)
		mustCreate(t, pvcs.Create, claim("external", "external", "1Gi"))
		eventually(t, "provisioner annotations", func(ctx context.Context) (bool, error) {
			pvc := getClaim(t, cs, "external")
			return pvc.Annotations["volume.kubernetes.io/storage-provisioner"] == "example.com/ext" &&
				pvc.Annotations["volume.beta.kubernetes.io/storage-provisioner"] == "example.com/ext", nil
		})
		waitEvent(t, cs, "default", "external", "ExternalProvisioning")
	})

	t.Run("WaitForFirstConsumer waits for selected-node", func(t *testing.T) {
		createClass(t, cs, "wffc", noProvisioner, storagev1.VolumeBindingWaitForFirstConsumer, false)
		for _, n := range []string{"node-a", "node-b"} {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}}
			mustCreate(t, cs.CoreV1().Nodes().Create, node)
		}
		mustCreate(t, pvs.Create, localPV("wffc-b", "wffc", "1Gi", "node-b"))
		mustCreate(t, pvs.Create, localPV("wffc-a", "wffc", "2Gi", "node-a"))
		mustCreate(t, pvcs.Create, claim("wffc", "wffc", "1Gi"))
		waitEvent(t, cs, "default", "wffc", "WaitForFirstConsumer")
		if pvc := getClaim(t, cs, "wffc"); pvc.Spec.VolumeName != "" {
			t.Fatalf("bound before a node was selected: %s", pvc.Spec.VolumeName)
		}
		patch := []byte(`{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"node-a"}}}`)
		if _, err := pvcs.Patch(t.Context(), "wffc", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := waitClaimBound(t, cs, "wffc").Spec.VolumeName; got != "wffc-a" {
			t.Errorf("bound to %s, want wffc-a (the only volume on node-a)", got)
		}
	})

	// Last: it makes a default class, which claims without a class would see.
	t.Run("retroactive default class", func(t *testing.T) {
		pvc := claim("noclass", "", "100Gi")
		pvc.Spec.StorageClassName = nil
		mustCreate(t, pvcs.Create, pvc)
		waitEvent(t, cs, "default", "noclass", "FailedBinding")
		createClass(t, cs, "standard", "example.com/std", storagev1.VolumeBindingImmediate, true)
		eventually(t, "default class assigned", func(ctx context.Context) (bool, error) {
			pvc := getClaim(t, cs, "noclass")
			return pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName == "standard" &&
				pvc.Annotations["volume.kubernetes.io/storage-provisioner"] == "example.com/std", nil
		})
	})
}

func waitClaimPhase(t *testing.T, cs kubernetes.Interface, name string, phase corev1.PersistentVolumeClaimPhase) {
	t.Helper()
	eventually(t, fmt.Sprintf("claim %s %s", name, phase), func(ctx context.Context) (bool, error) {
		pvc, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == phase, nil
	})
}

func localPV(name, class, size, node string) *corev1.PersistentVolume {
	pv := hostPathPV(name, class, size)
	pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/" + name}}
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}}
	return pv
}

func ptrTo[T any](v T) *T { return &v }
