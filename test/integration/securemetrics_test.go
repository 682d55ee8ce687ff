package integration

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/test/cluster"
)

// TestSecureMetrics runs the binder with --metrics-secure on a real API
// server, its requests checked against deploy/csi's RBAC with the
// secure-metrics component, and scrapes it as deploy/csi's roles allow:
// no token is 401, the token of a ServiceAccount without
// tether-metrics-reader 403, one bound to it 200 with tether's metrics;
// /healthz answers without a token.
func TestSecureMetrics(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	cs := c.Client
	// The component's reader role, as deploy/csi/components/secure-metrics
	// renders it.
	applySecureMetricsReader(t, c)
	for _, sa := range []string{"scraper", "stranger"} {
		mustCreate(t, cs.CoreV1().ServiceAccounts("default").Create, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}})
	}
	mustCreate(t, cs.RbacV1().ClusterRoleBindings().Create, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-tether-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tether-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: "default"}},
	})
	token := func(sa string) string {
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(t.Context(), sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token of %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	scraper, stranger := token("scraper"), token("stranger")

	addr := cluster.FreeAddr(t)
	path := cluster.BuildBinary(t, "./cmd/binder")
	c.Run(t, cluster.ProcessOptions{Name: "binder", Path: path, Args: []string{
		"--kubeconfig=" + c.RBACCheckedKubeconfig(t, "tether-binder", "secure-metrics"),
		"--leader-elect=false", "-v=4", "--http-endpoint=" + addr, "--metrics-secure"}})

	// The binder's certificate is self-signed, made at its start.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed certificate
	get := func(ctx context.Context, path, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	eventually(t, "the binder's /healthz answers 200 over HTTPS without a token", func(ctx context.Context) (bool, error) {
		code, _, err := get(ctx, "/healthz", "")
		return err == nil && code == http.StatusOK, nil
	})
	t.Logf("/healthz without a token: %d", http.StatusOK)

	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a token the API server does not know", "not-a-token", http.StatusUnauthorized},
		{"ServiceAccount stranger (no role)", stranger, http.StatusForbidden},
		{"ServiceAccount scraper (tether-metrics-reader)", scraper, http.StatusOK},
	} {
		code, body, err := get(t.Context(), "/metrics", tc.token)
		if err != nil {
			t.Fatalf("/metrics with %s: %v", tc.who, err)
		}
		t.Logf("/metrics with %s: %d", tc.who, code)
		if code != tc.want {
			t.Errorf("/metrics with %s: %d, want %d: %s", tc.who, code, tc.want, body)
		}
		if code == http.StatusOK && !strings.Contains(body, "\ntether_") {
			t.Errorf("/metrics with %s: no tether_ metric in\n%s", tc.who, body)
		}
	}
	// Plain HTTP is not served.
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP /metrics answered 200")
		}
	}
}

// applySecureMetricsReader creates the ClusterRole tether-metrics-reader
// from deploy/csi rendered with the secure-metrics component.
func applySecureMetricsReader(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	data, err := cluster.RenderDeploy("secure-metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range decodeBundle(t, data) {
		if o.GetKind() != "ClusterRole" || o.GetName() != "tether-metrics-reader" {
			continue
		}
		var role rbacv1.ClusterRole
		fromUnstructured(t, o, &role)
		mustCreate(t, c.Client.RbacV1().ClusterRoles().Create, &role)
		return
	}
	t.Fatal("deploy/csi with secure-metrics has no ClusterRole tether-metrics-reader")
}
