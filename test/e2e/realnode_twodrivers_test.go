package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tether-csi/tether/test/cluster"
)

// ownHarness2 is ownHarness for the second driver: the images as the
// nodes have them, and the API server's address for its pod.
const ownHarness2 = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../own2]
images:
  - {name: ghcr.io/tether-csi/provisioner, newName: %[1]s, newTag: e2e}
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: ` + cluster.SecondDriverDeploy + `, namespace: ` + cluster.SecondDriverNamespace + `}
      spec: {template: {spec: {containers: [{name: csi-provisioner, env: [%[2]s]}]}}}
`

// twoDriversTree writes the first driver's tree and the second's beside
// it, with the harnesses of a cluster whose API server is apiHost (none
// when it is empty), and returns its folder.
func twoDriversTree(t *testing.T, apiHost string) string {
	t.Helper()
	dir := ownDriverTree(t, apiHost)
	harness := ""
	if apiHost != "" {
		harness = fmt.Sprintf(ownHarness2, untagged(cluster.ProvisionerImage), apiServerEnv(t, apiHost))
	}
	cluster.WriteSecondDriverTree(t, dir, harness)
	return dir
}

// clusterScoped is "Kind name" of each cluster-scoped object of objs.
func clusterScoped(t *testing.T, objs []runtime.Object) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			t.Fatal(err)
		}
		if m.GetNamespace() == "" {
			out[o.GetObjectKind().GroupVersionKind().Kind+" "+m.GetName()] = true
		}
	}
	return out
}

// TestTwoDriversComponent renders the recipes of two drivers side by side
// (docs/own-driver.md, "Two drivers"; no cluster): no cluster-scoped
// object is in both, so neither `kubectl apply -k` takes over, and neither
// `kubectl delete -k` deletes, what the other installed; each extra binding
// names its own role and its own driver's ServiceAccount; the second brings
// no binder.
func TestTwoDriversComponent(t *testing.T) {
	dir := twoDriversTree(t, "")
	first := decodeAll(t, kustomize(t, filepath.Join(dir, "own")))
	second := decodeAll(t, kustomize(t, filepath.Join(dir, "own2")))
	one, two := clusterScoped(t, first), clusterScoped(t, second)
	for k := range two {
		if one[k] {
			t.Errorf("%s is in both drivers' recipes", k)
		}
	}
	if len(two) == 0 {
		t.Fatal("the second recipe renders no cluster-scoped object")
	}
	for _, d := range []struct {
		objs     []runtime.Object
		name, ns string
	}{{first, cluster.OwnExtraRBAC, cluster.OwnDriverNamespace}, {second, cluster.SecondExtraRBAC, cluster.SecondDriverNamespace}} {
		var role, binding bool
		for _, o := range d.objs {
			switch o := o.(type) {
			case *rbacv1.ClusterRole:
				role = role || o.Name == d.name
			case *rbacv1.ClusterRoleBinding:
				if o.Name != d.name {
					continue
				}
				binding = true
				want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "csi-provisioner", Namespace: d.ns}}
				if !reflect.DeepEqual(o.Subjects, want) || o.RoleRef.Name != d.name {
					t.Errorf("binding %s: subjects %+v, role %s", o.Name, o.Subjects, o.RoleRef.Name)
				}
			}
		}
		if !role || !binding {
			t.Errorf("the recipe renders ClusterRole %s %v, ClusterRoleBinding %v", d.name, role, binding)
		}
	}
	if findDeployment(second, "tether-system", "tether-binder") != nil {
		t.Error("the second driver's recipe brings a second binder")
	}
	if findDeployment(second, cluster.SecondDriverNamespace, cluster.SecondDriverDeploy) == nil {
		t.Error("the second driver's recipe has no driver Deployment")
	}
}

// secondDriverOnNode installs the second driver's recipe beside the first
// (running on c's real node), and checks both serve: each ServiceAccount
// passes docs/own-driver.md's RBAC check, a claim of each class is
// provisioned by its own driver and bound, the second's is deleted with its
// volume; then the second driver is deleted (kubectl delete of its
// manifests) and the first's ServiceAccount still passes the check.
func secondDriverOnNode(t *testing.T, c *cluster.Cluster, dir string) {
	started := time.Now()
	manifests := c.Kubectl(t, nil, "kustomize", filepath.Join(dir, "harness2"))
	c.Kubectl(t, manifests, "apply", "-f", "-")
	apps := c.Client.AppsV1()
	defer func() {
		if t.Failed() {
			dumpNamespace(t, c, cluster.SecondDriverNamespace)
		}
	}()
	cluster.Eventually(t, "the second driver's controller ready", func(ctx context.Context) (bool, error) {
		got, err := apps.Deployments(cluster.SecondDriverNamespace).Get(ctx, cluster.SecondDriverDeploy, metav1.GetOptions{})
		return err == nil && got.Spec.Replicas != nil && got.Status.ReadyReplicas == *got.Spec.Replicas, nil
	})
	t.Logf("second driver ready %s after apply", time.Since(started).Round(100*time.Millisecond))
	firstSA := "system:serviceaccount:" + cluster.OwnDriverNamespace + ":csi-provisioner"
	secondSA := "system:serviceaccount:" + cluster.SecondDriverNamespace + ":csi-provisioner"
	rbacCheck(t, c, firstSA)
	rbacCheck(t, c, secondSA)

	pvcs := c.Client.CoreV1().PersistentVolumeClaims("default")
	for _, d := range []struct{ claim, class, driver string }{
		{"second", cluster.SecondDriverClass, cluster.SecondDriverName},
		{"first-again", cluster.OwnDriverClass, cluster.OwnDriverName},
	} {
		class := d.class
		if _, err := pvcs.Create(t.Context(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: d.claim, Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pvc := c.WaitClaimBound(t, "default", d.claim)
		pv, err := c.Client.CoreV1().PersistentVolumes().Get(t.Context(), pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != d.driver || pv.Annotations["pv.kubernetes.io/provisioned-by"] != d.driver {
			t.Errorf("claim %s: PV %s of %+v, provisioned by %q; want %s", d.claim, pv.Name, pv.Spec.CSI, pv.Annotations["pv.kubernetes.io/provisioned-by"], d.driver)
		}
		if err := pvcs.Delete(t.Context(), d.claim, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		cluster.WaitGone(t, "PV "+pv.Name, func(ctx context.Context) error {
			_, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return err
		})
	}
	t.Logf("a claim of each driver provisioned, bound and deleted with its volume")

	c.Kubectl(t, manifests, "delete", "--wait=false", "-f", "-")
	rbacCheck(t, c, firstSA)
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Get(t.Context(), cluster.OwnExtraRBAC, metav1.GetOptions{}); err != nil {
		t.Errorf("the first driver's binding %s after the second's removal: %v", cluster.OwnExtraRBAC, err)
	}
	t.Logf("two drivers: %s in all", time.Since(started).Round(time.Second))
}

// rbacCheck runs docs/own-driver.md's RBAC check for the ServiceAccount
// user sa: every line must be allowed.
func rbacCheck(t *testing.T, c *cluster.Cluster, sa string) {
	t.Helper()
	for _, attrs := range docCanIList(t) {
		review, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authv1.SubjectAccessReview{
			Spec: authv1.SubjectAccessReviewSpec{User: sa, ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !review.Status.Allowed {
			t.Errorf("%s may not %s %s.%s", sa, attrs.Verb, attrs.Resource, attrs.Group)
		}
	}
}

// dumpNamespace logs the pods of namespace (phase, each container's state)
// and its events, for a failed test.
func dumpNamespace(t *testing.T, c *cluster.Cluster, namespace string) {
	ctx := context.Background()
	pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("pods of %s: %v", namespace, err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s/%s on %q: %s %v", namespace, p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
		for _, st := range p.Status.ContainerStatuses {
			t.Logf("  container %s ready=%v restarts=%d state=%+v last=%+v", st.Name, st.Ready, st.RestartCount, st.State, st.LastTerminationState)
		}
	}
	events, err := c.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s %s: %s", e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
		}
	}
}
