package kindnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// kubernetesPrograms are built from k8s.io/kubernetes at the pinned
// version: the node's own (kubeadm, kubelet, kubectl) and those the
// control-plane images run.
var kubernetesPrograms = []string{"kubeadm", "kubelet", "kubectl",
	"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"}

// binaries builds the programs into a cached folder keyed by the tools
// module (which pins every version) and returns it. Each is stamped with
// the Kubernetes version (kind reads it from /kind/version, kubeadm checks
// its own) and stripped.
func binaries(ctx context.Context, o Options) (string, error) {
	tools := filepath.Join(o.Root, "hack", "tools")
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "versions.env"} {
		data, err := os.ReadFile(filepath.Join(tools, f))
		if err != nil {
			return "", err
		}
		h.Write(data)
	}
	pause, err := os.ReadFile(filepath.Join(o.Root, "hack", "images", "pause", "main.go"))
	if err != nil {
		return "", err
	}
	h.Write(pause)
	dir := filepath.Join(o.Cache, "bin-"+hex.EncodeToString(h.Sum(nil))[:16])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	minor := strings.SplitN(strings.TrimPrefix(o.KubernetesVersion, "v"), ".", 3)[1]
	vpkg := "k8s.io/component-base/version"
	ldflags := fmt.Sprintf("-s -w -X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=1 -X %[1]s.gitMinor=%[3]s -X %[1]s.gitTreeState=clean",
		vpkg, o.KubernetesVersion, minor)
	for _, p := range kubernetesPrograms {
		if err := goBuild(ctx, o, tools, filepath.Join(dir, p), "k8s.io/kubernetes/cmd/"+p, ldflags, nil); err != nil {
			return "", err
		}
	}
	if err := goBuild(ctx, o, tools, filepath.Join(dir, "etcd"), "go.etcd.io/etcd/server/v3", "-s -w", nil); err != nil {
		return "", err
	}
	if err := goBuild(ctx, o, o.Root, filepath.Join(dir, "pause"), "./hack/images/pause", "-s -w", []string{"CGO_ENABLED=0"}); err != nil {
		return "", err
	}
	return dir, nil
}

// goBuild builds pkg in module dir mod into out, unless out exists.
func goBuild(ctx context.Context, o Options, mod, out, pkg, ldflags string, env []string) error {
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	o.logf("building %s", filepath.Base(out))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out+".tmp", pkg)
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return os.Rename(out+".tmp", out)
}
