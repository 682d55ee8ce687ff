package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/tether-csi/tether/test/cluster"
)

// TestWhyClusterFlags runs kubectl-tether with kubectl's cluster flags on a
// real API server: --as makes the reads the impersonated user's (its RBAC
// decides what it may read), and --server, --token and
// --certificate-authority reach the cluster with a kubeconfig that names
// nothing.
func TestWhyClusterFlags(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	cs := c.Client
	bin := cluster.BuildBinary(t, "./cmd/kubectl-tether")
	mustCreate(t, cs.CoreV1().PersistentVolumeClaims("default").Create, claim("waits", "manual", "1Gi"))
	mustCreate(t, cs.CoreV1().ServiceAccounts("default").Create, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}})
	mustCreate(t, cs.RbacV1().Roles("default").Create, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "claim-viewer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list"}}}})
	mustCreate(t, cs.RbacV1().RoleBindings("default").Create, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "claim-viewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "claim-viewer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "viewer"}}})

	// The admin reads everything.
	admin := runWhyStatus(t, bin, c.Kubeconfig, 1, "default/waits")
	if strings.Contains(admin, "Could not read") {
		t.Errorf("as the admin:\n%s", admin)
	}

	t.Run("--as", func(t *testing.T) {
		var text string
		// The RoleBinding may take a moment to reach the authorizer's cache.
		err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
			var code int
			text, code = runWhyCode(t, bin, c.Kubeconfig, "--as=system:serviceaccount:default:viewer", "default/waits")
			return code == 2 && strings.Contains(text, "Claim default/waits: Pending"), nil
		})
		if err != nil {
			t.Fatalf("--as the viewer: %v (want exit status 2)\n%s", err, text)
		}
		if !strings.Contains(text, "Could not read: ") || !strings.Contains(text, "persistentvolumes (forbidden") {
			t.Errorf("--as the viewer: the volumes it may not read are not named:\n%s", text)
		}
		// A user with no role may not read the claim at all.
		out := runWhyStatus(t, bin, c.Kubeconfig, 2, "--as=nobody", "--as-group=nobodies", "default/waits")
		if !strings.Contains(out, `User "nobody" cannot get resource "persistentvolumeclaims"`) {
			t.Errorf("--as nobody: not refused as nobody:\n%s", out)
		}
	})

	t.Run("--server --token --certificate-authority", func(t *testing.T) {
		_, rc := c.AdminTokenKubeconfig(t)
		dir := t.TempDir()
		ca := filepath.Join(dir, "ca.crt")
		if err := os.WriteFile(ca, rc.CAData, 0o600); err != nil {
			t.Fatal(err)
		}
		empty := filepath.Join(dir, "empty.kubeconfig")
		if err := clientcmd.WriteToFile(*clientcmdapi.NewConfig(), empty); err != nil {
			t.Fatal(err)
		}
		out := runWhyStatus(t, bin, empty, 1, "--server="+rc.Host, "--token="+rc.BearerToken, "--certificate-authority="+ca, "-n", "default", "waits")
		if !strings.Contains(out, "Claim default/waits: Pending") || strings.Contains(out, "Could not read") {
			t.Errorf("with --server and --token:\n%s", out)
		}
		// A wrong token is the API server's 401, not the kubeconfig's user.
		out = runWhyStatus(t, bin, empty, 2, "--server="+rc.Host, "--token=wrong", "--certificate-authority="+ca, "default/waits")
		if !strings.Contains(out, "Unauthorized") {
			t.Errorf("with a wrong token:\n%s", out)
		}
	})
}
