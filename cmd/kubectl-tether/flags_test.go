package main

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestClusterFlags: kubectl's cluster flags reach the client configuration
// as they do in kubectl, over the kubeconfig's values.
func TestClusterFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["one"] = &clientcmdapi.Cluster{Server: "https://one.example:6443"}
	cfg.Clusters["two"] = &clientcmdapi.Cluster{Server: "https://two.example:6443"}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: "admin-token"}
	cfg.AuthInfos["viewer"] = &clientcmdapi.AuthInfo{Token: "viewer-token"}
	cfg.Contexts["main"] = &clientcmdapi.Context{Cluster: "one", AuthInfo: "admin", Namespace: "apps"}
	cfg.Contexts["other"] = &clientcmdapi.Context{Cluster: "two", AuthInfo: "viewer"}
	cfg.CurrentContext = "main"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                   string
		args                   []string
		host, token, contextNS string
		as, uid                string
		groups                 []string
		timeout                time.Duration
		insecure               bool
		namespace              string // -n's
	}{
		{name: "the kubeconfig alone", args: nil, host: "https://one.example:6443", token: "admin-token", contextNS: "apps", timeout: 30 * time.Second},
		{name: "impersonation", args: []string{"--as=system:serviceaccount:apps:viewer", "--as-group=team-a", "--as-group=team-b", "--as-uid=42"},
			host: "https://one.example:6443", token: "admin-token", contextNS: "apps", timeout: 30 * time.Second,
			as: "system:serviceaccount:apps:viewer", uid: "42", groups: []string{"team-a", "team-b"}},
		{name: "server and token", args: []string{"--server=https://elsewhere:6443", "--token=t0k3n", "--insecure-skip-tls-verify", "--request-timeout=5"},
			host: "https://elsewhere:6443", token: "t0k3n", contextNS: "apps", timeout: 5 * time.Second, insecure: true},
		{name: "-s", args: []string{"-s", "https://short:6443"}, host: "https://short:6443", token: "admin-token", contextNS: "apps", timeout: 30 * time.Second},
		{name: "context", args: []string{"--context=other", "--request-timeout=0"}, host: "https://two.example:6443", token: "viewer-token", contextNS: "default"},
		{name: "cluster and user", args: []string{"--cluster=two", "--user=viewer", "-n", "db", "--request-timeout=2m"},
			host: "https://two.example:6443", token: "viewer-token", contextNS: "apps", timeout: 2 * time.Minute, namespace: "db"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(append([]string{"--kubeconfig", kubeconfig, "claim"}, tt.args...))
			if err != nil {
				t.Fatal(err)
			}
			rc, contextNS, err := o.flags.restConfig()
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != tt.host || rc.BearerToken != tt.token || contextNS != tt.contextNS || o.namespace != tt.namespace {
				t.Errorf("host %q token %q context namespace %q -n %q, want %q %q %q %q",
					rc.Host, rc.BearerToken, contextNS, o.namespace, tt.host, tt.token, tt.contextNS, tt.namespace)
			}
			if rc.Impersonate.UserName != tt.as || rc.Impersonate.UID != tt.uid || !slices.Equal(rc.Impersonate.Groups, tt.groups) {
				t.Errorf("impersonation %+v, want %q %q %q", rc.Impersonate, tt.as, tt.uid, tt.groups)
			}
			if o.timeout != tt.timeout || rc.Timeout != tt.timeout || rc.Insecure != tt.insecure {
				t.Errorf("timeout %s (per request %s), insecure %v; want %s, %v", o.timeout, rc.Timeout, rc.Insecure, tt.timeout, tt.insecure)
			}
		})
	}
}
