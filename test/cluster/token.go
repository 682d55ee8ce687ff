package cluster

import (
	"context"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as a
// ServiceAccount with a token from the TokenRequest API, as a component in
// a pod does, and returns its path and a client configuration for it. The
// ServiceAccount may still be on its way: it is waited for.
func (c *Cluster) ServiceAccountKubeconfig(t T, namespace, name string) (string, *rest.Config) {
	t.Helper()
	var token string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		seconds := int64(3600)
		tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
		if err != nil {
			return false, nil
		}
		token = tr.Status.Token
		return true, nil
	})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name, Namespace: namespace}
	cfg.CurrentContext = name
	path := filepath.Join(c.Dir, namespace+"-"+name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	rc := &rest.Config{Host: c.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: c.Config.CAData},
		QPS: c.Config.QPS, Burst: c.Config.Burst}
	return path, rc
}

// AdminTokenKubeconfig is ServiceAccountKubeconfig for a ServiceAccount
// bound to cluster-admin (kube-system/tether-admin, made on first use).
// The API server caches a token's authentication, while it verifies the
// chain of a client certificate (Kubeconfig's identity) on every request:
// benchmarks use a token, as components in a cluster do, so that the API
// server's work is the work of a real cluster.
func (c *Cluster) AdminTokenKubeconfig(t T) (string, *rest.Config) {
	t.Helper()
	ctx := t.Context()
	const ns, name = "kube-system", "tether-admin"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return c.ServiceAccountKubeconfig(t, ns, name)
}
