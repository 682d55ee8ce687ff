package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	tcsi "github.com/tether-csi/tether/pkg/csi"
	"github.com/tether-csi/tether/pkg/nodeloss"
	"github.com/tether-csi/tether/test/cluster"
)

// Issue 49 on a real control plane: a static Delete PV deleted while
// Bound takes its volume with it; a hostname two nodes carry releases
// nothing when one of them is lost; a PV save refused past the save grace
// never lands after its volume was cleaned up.

// longEventually is eventually for what waits on the save grace (90 s) and
// the library's backoff: up to 5 minutes.
func longEventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), time.Second, 5*time.Minute, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// adminVolume makes a volume on the driver as an admin would with the
// storage's own tools, and returns its handle.
func adminVolume(t *testing.T, socket, name string) string {
	t.Helper()
	conn, err := tcsi.Connect(t.Context(), tcsi.Options{Address: socket})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := conn.CreateVolume(t.Context(), &csi.CreateVolumeRequest{Name: name,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetVolume().GetVolumeId()
}

// TestStaticDeletePVDeletedWhileBound: an admin's static CSI PV of the
// driver, reclaim policy Delete, bound to a claim, is deleted while Bound
// (kubectl delete -f listing the PV first), then the claim: the PV goes
// and its volume with it, as with external-provisioner v6. On 8fcaf72 the
// PV left the provisioner's cache at its Bound write, never got the
// deletion finalizer, and went without a DeleteVolume.
func TestStaticDeletePVDeletedWhileBound(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	mock := startMock(t, c, mockName, "")
	startProvisioner(t, c, "mock", mock.Socket)
	startBinder(t, c)
	handle := adminVolume(t, mock.Socket, "pvc-admin-made")
	if !slices.Contains(mock.Volumes(t), handle) {
		t.Fatalf("the admin's volume %s is not on the backend: %v", handle, mock.Volumes(t))
	}
	mustCreate(t, cs.CoreV1().PersistentVolumes().Create, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "admin-pv"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef:                      &corev1.ObjectReference{Namespace: "default", Name: "admin-claim"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: mockName, VolumeHandle: handle}},
		}})
	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("admin-claim", "", "1Gi"))
	waitClaimBound(t, cs, "admin-claim")
	eventually(t, "the deletion finalizer on the Bound static PV", func(ctx context.Context) (bool, error) {
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, "admin-pv", metav1.GetOptions{})
		return err == nil && slices.Contains(pv.Finalizers, "external-provisioner.volume.kubernetes.io/finalizer"), nil
	})

	if err := cs.CoreV1().PersistentVolumes().Delete(t.Context(), "admin-pv", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteClaim(t, cs, "admin-claim")
	waitGone(t, func(ctx context.Context) error {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, "admin-pv", metav1.GetOptions{})
		return err
	})
	eventually(t, "DeleteVolume of the admin's volume", func(context.Context) (bool, error) {
		return !slices.Contains(mock.Volumes(t), handle), nil
	})
	t.Logf("PV admin-pv gone, and its volume %s deleted", handle)
}

// TestHostnameTwinLossReleasesNothing: nodes node-1 and node-1.dc2 both
// carry kubernetes.io/hostname=node-1, node-2 its own. Claims of a class
// that releases on node loss are bound to a PV pinned by hostname node-1
// and to one pinned to node-2; node-1 and node-2 are tainted out of
// service. The node-2 claim is released (the control); the node-1 claim,
// whose volume node-1.dc2 may hold, is not, and its PV carries no mark.
func TestHostnameTwinLossReleasesNothing(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	startBinder(t, c, "--node-loss-grace=1s")
	for name, host := range map[string]string{"node-1": "node-1", "node-1.dc2": "node-1", "node-2": "node-2"} {
		mustCreate(t, cs.CoreV1().Nodes().Create, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{corev1.LabelHostname: host}}})
	}
	mode := storagev1.VolumeBindingImmediate
	mustCreate(t, cs.StorageV1().StorageClasses().Create, &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "release", Annotations: map[string]string{nodeloss.AnnPolicy: "true"}},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &mode})
	for _, host := range []string{"node-1", "node-2"} {
		pv := hostPathPV("pv-"+host, "release", "1Gi")
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data-" + host}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{host}}}}}}}
		mustCreate(t, cs.CoreV1().PersistentVolumes().Create, pv)
		mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("data-"+host, "release", "1Gi"))
		waitClaimBound(t, cs, "data-"+host)
	}
	twin := getClaim(t, cs, "data-node-1").UID
	for _, name := range []string{"node-1", "node-2"} {
		n, err := cs.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute})
		if _, err := cs.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitEvent(t, cs, "default", "data-node-2", "ReleasedForNodeLoss")
	waitGone(t, func(ctx context.Context) error {
		_, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-node-2", metav1.GetOptions{})
		return err
	})
	if got := getClaim(t, cs, "data-node-1"); got.UID != twin || got.DeletionTimestamp != nil {
		t.Errorf("the claim of hostname node-1 was released (uid %s, deleting %v)", got.UID, got.DeletionTimestamp != nil)
	}
	pv := getPV(t, cs, "pv-node-1")
	for k := range pv.Annotations {
		if strings.HasPrefix(k, "tether.dev/") {
			t.Errorf("the PV of hostname node-1 is marked %s=%s", k, pv.Annotations[k])
		}
	}
	t.Logf("node-2's claim released; node-1's (hostname shared with node-1.dc2) bound to %s, unmarked", pv.Name)
}

// TestRefusedSaveNeverLandsAfterCleanUp: a ValidatingAdmissionPolicy
// refuses every PV for longer than the save grace (90 s); the claim is
// deleted meanwhile and the in-flight clean-up deletes its volume. Once
// the policy goes, the library's next try to save the PV (it retries for
// ever) must not land a PV naming the deleted volume. On 8fcaf72 it did.
func TestRefusedSaveNeverLandsAfterCleanUp(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: protectionControllers})
	cs := c.Client
	mock := startMock(t, c, mockName, "")
	prov := startProvisioner(t, c, "mock", mock.Socket)
	startBinder(t, c)
	createCSIClass(t, c, "refused", mockName, "Delete", storagev1.VolumeBindingImmediate)
	fail := admissionregistrationv1.Fail
	mustCreate(t, cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pvs"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"persistentvolumes"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "PVs are refused for now"}}}})
	mustCreate(t, cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pvs"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "no-pvs",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}})
	probe := hostPathPV("probe", "refused", "1Gi")
	eventually(t, "the policy in force (a dry-run PV refused)", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().PersistentVolumes().Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "PVs are refused for now"), nil
	})

	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("refused", "refused", "1Gi"))
	uid := getClaim(t, cs, "refused").UID
	volume := "pvc-" + string(uid)
	eventually(t, "the library's save refused", func(context.Context) (bool, error) {
		return strings.Contains(cluster.Tail(prov.LogPath, 2000), "PVs are refused for now"), nil
	})
	deleteClaim(t, cs, "refused")
	longEventually(t, "the clean-up to delete the unsaved volume, past the save grace", func(context.Context) (bool, error) {
		return strings.Contains(cluster.Tail(prov.LogPath, 5000), "Deleted the volume made for the claim and never saved"), nil
	})
	waitGone(t, func(ctx context.Context) error {
		_, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "refused", metav1.GetOptions{})
		return err
	})
	if vols := mock.Volumes(t); slices.Contains(vols, volume) {
		t.Fatalf("volume %s is still on the backend after its clean-up: %v", volume, vols)
	}
	if err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(t.Context(), "no-pvs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	longEventually(t, "the library's next save of the PV, refused in the process or landed", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, volume, metav1.GetOptions{})
		return err == nil || strings.Contains(cluster.Tail(prov.LogPath, 5000), "Not saving the PV: its volume was cleaned up"), nil
	})
	if _, err := cs.CoreV1().PersistentVolumes().Get(t.Context(), volume, metav1.GetOptions{}); err == nil {
		t.Fatalf("PV %s was saved after its volume was deleted", volume)
	}
	t.Logf("volume %s cleaned up; the library's later save of its PV was refused in the process", volume)
}
