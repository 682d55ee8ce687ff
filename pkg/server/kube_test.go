package server

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRestConfigSpeaksProtobufWithGzip: the clients speak protobuf, as
// kube-controller-manager's do, and keep client-go's gzip, which served a
// driver roll's listings faster than none did.
func TestRestConfigSpeaksProtobufWithGzip(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	data := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n" +
		"contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
	if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := KubeOptions{Kubeconfig: kubeconfig, QPS: 50, Burst: 100}.RestConfig("test")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DisableCompression || cfg.ContentType != "application/vnd.kubernetes.protobuf" || cfg.QPS != 50 || cfg.Burst != 100 || cfg.UserAgent != "test" {
		t.Errorf("config %+v", cfg)
	}
}
