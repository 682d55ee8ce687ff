package integration

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/test/cluster"
)

// The promise of issue 24 on a real control plane: what a namespace user
// can write decides no other volume's fate, and a namespace deleted while
// a claim's volume is in flight goes, leaving nothing behind.

// asUser is a client that acts as user, with only the RBAC the user has.
func asUser(t *testing.T, c *cluster.Cluster, user string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestTenantForgedRecordCostsNoOtherVolume: a user with the built-in edit
// role in their own namespace forges tether's in-flight record on a claim
// (finalizer and annotations naming a disk an admin kept, and its handle
// as a clone source), then deletes the claim. The disk stays; the claim
// goes.
func TestTenantForgedRecordCostsNoOtherVolume(t *testing.T) {
	// The aggregation controller fills the built-in edit role.
	c := cluster.Start(t, cluster.Options{Controllers: append([]string{"clusterrole-aggregation-controller"}, protectionControllers...)})
	cs := c.Client
	mock := startMock(t, c, mockName, "")
	startProvisioner(t, c, "mock", mock.Socket)
	startBinder(t, c)
	createCSIClass(t, c, "keep", mockName, "Retain", storagev1.VolumeBindingImmediate)
	createCSIClass(t, c, "wait", mockName, "Delete", storagev1.VolumeBindingWaitForFirstConsumer)

	// A disk an admin keeps: its claim deleted, its Retain PV deleted.
	pvcs := cs.CoreV1().PersistentVolumeClaims("default")
	mustCreate(t, pvcs.Create, claim("kept", "keep", "1Gi"))
	kept := waitClaimBound(t, cs, "kept")
	pv := getPV(t, cs, kept.Spec.VolumeName)
	handle := pv.Spec.CSI.VolumeHandle
	deleteClaim(t, cs, "kept")
	waitVolumePhase(t, cs, pv.Name, corev1.VolumeReleased)
	if err := cs.CoreV1().PersistentVolumes().Delete(t.Context(), pv.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, func(ctx context.Context) error {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err
	})
	if !slices.Contains(mock.Volumes(t), handle) {
		t.Fatalf("the kept disk %s is not on the backend: %v", handle, mock.Volumes(t))
	}

	// The tenant: edit in namespace tenant, nothing else.
	mustCreate(t, cs.CoreV1().Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}})
	mustCreate(t, cs.RbacV1().RoleBindings("tenant").Create, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}},
	})
	alice := asUser(t, c, "alice")
	if _, err := alice.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("alice can list PVs (%v): the test's tenant has too much", err)
	}
	forged := claim("forged", "wait", "1Gi")
	forged.Namespace = "tenant"
	forged.Finalizers = []string{inflight.Finalizer}
	forged.Annotations = map[string]string{inflight.AnnVolume: pv.Name, inflight.AnnDriver: mockName,
		inflight.AnnSource: handle, inflight.AnnSnapshot: handle}
	eventually(t, "alice creates the forged claim", func(ctx context.Context) (bool, error) {
		_, err := alice.CoreV1().PersistentVolumeClaims("tenant").Create(ctx, forged, metav1.CreateOptions{})
		return err == nil, err
	})
	if err := alice.CoreV1().PersistentVolumeClaims("tenant").Delete(t.Context(), "forged", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, func(ctx context.Context) error {
		_, err := cs.CoreV1().PersistentVolumeClaims("tenant").Get(ctx, "forged", metav1.GetOptions{})
		return err
	})
	if vols := mock.Volumes(t); !slices.Contains(vols, handle) {
		t.Fatalf("the forged record cost the kept disk %s: backend volumes %v", handle, vols)
	}
	t.Logf("forged claim gone; the kept disk %s is still on the backend (%d volumes)", handle, len(mock.Volumes(t)))
}

// TestNamespaceDeletedMidProvisioning: a claim whose class takes its
// provisioner secret from the claim's namespace; its CreateVolume times
// out while the driver makes the volume; the namespace is deleted. The
// namespace goes, and the driver keeps no volume.
func TestNamespaceDeletedMidProvisioning(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Controllers: append([]string{"namespace-controller"}, protectionControllers...)})
	cs := c.Client
	mock := startMock(t, c, mockName, slowCreate)
	prov := startProvisioner(t, c, "mock", mock.Socket, "--timeout=1s", "--retry-interval-start=10s")
	startBinder(t, c)
	mode := storagev1.VolumeBindingImmediate
	mustCreate(t, cs.StorageV1().StorageClasses().Create, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "secret"},
		Provisioner: mockName, VolumeBindingMode: &mode, Parameters: map[string]string{
			"csi.storage.k8s.io/provisioner-secret-name":      "creds",
			"csi.storage.k8s.io/provisioner-secret-namespace": "${pvc.namespace}",
		}})
	mustCreate(t, cs.CoreV1().Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}})
	mustCreate(t, cs.CoreV1().Secrets("doomed").Create, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"token": "t"}})
	pvc := claim("data", "secret", "1Gi")
	pvc.Namespace = "doomed"
	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("doomed").Create, pvc)

	eventually(t, "CreateVolume timed out", func(ctx context.Context) (bool, error) {
		return strings.Contains(cluster.Tail(prov.LogPath, 1000), "CreateVolume failed"), nil
	})
	if !inflight.Holds(getClaimIn(t, cs, "doomed", "data")) {
		t.Fatal("no in-flight record while CreateVolume was in flight")
	}
	if err := cs.CoreV1().Namespaces().Delete(t.Context(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, func(ctx context.Context) error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		return err
	})
	eventually(t, "the driver keeps no volume", func(ctx context.Context) (bool, error) {
		return len(mock.Volumes(t)) == 0, nil
	})
	pvs, err := cs.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pvs.Items) != 0 {
		t.Errorf("%d PVs left", len(pvs.Items))
	}
	if strings.Contains(cluster.Tail(prov.LogPath, 5000), "Abandoning") {
		t.Error("the clean-up abandoned the volume")
	}
}

func getClaimIn(t *testing.T, cs kubernetes.Interface, namespace, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	c, err := cs.CoreV1().PersistentVolumeClaims(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
