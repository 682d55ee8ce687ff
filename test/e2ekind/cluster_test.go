package e2ekind

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tether-csi/tether/test/kind"
	"github.com/tether-csi/tether/test/kindnode"
)

// clusterName is the kind cluster's name (KIND_CLUSTER_NAME overrides).
func clusterName() string {
	if n := os.Getenv("KIND_CLUSTER_NAME"); n != "" {
		return n
	}
	return "tether-e2e"
}

// env is a running kind cluster and what reaches it.
type env struct {
	d          *kind.Docker
	kind       string // the kind binary
	bin        string // a folder with kind and kubectl, first on PATH for the README's commands
	dir        string // the test's folder: kubeconfig, kind config
	kubeconfig string
	ownImage   bool // tether's node image (no registry reachable): stand-in images are loaded
	client     *kubernetes.Clientset
	nodes      []string
}

// kindConfig is the cluster: one control plane, two workers, KCM without
// its PV binder (tether's binder replaces it). On cgroup v1 hosts kubelet
// must be told to accept v1. tether's own node image has no CoreDNS.
func kindConfig(ownImage bool) string {
	c := `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
    kubeadmConfigPatches:
      - |
        kind: ClusterConfiguration
        controllerManager:
          extraArgs:
            - name: controllers
              value: "*,bootstrapsigner,tokencleaner,-persistentvolume-binder-controller"
  - role: worker
  - role: worker
kubeadmConfigPatches:
  - |
    kind: KubeletConfiguration
    failCgroupV1: false
`
	if ownImage {
		c += `  - |
    kind: InitConfiguration
    skipPhases: [preflight, addon/coredns]
`
	} else {
		c += "containerdConfigPatches:\n  - |\n    " + strings.ReplaceAll(strings.TrimSpace(kind.ContainerdConfigPatch), "\n", "\n    ") + "\n"
	}
	return c
}

// upCluster makes the cluster, or skips when no docker engine can run
// here. Its clean-up deletes the cluster and stops a private engine,
// unless KEEP=1, which leaves both and logs how to reach them.
func upCluster(t *testing.T, ctx context.Context) *env {
	t.Helper()
	if os.Getenv("TETHER_KIND") != "1" {
		t.Skip("makes a kind cluster: run make e2e-kind (TETHER_KIND=1)")
	}
	root, err := kind.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{dir: t.TempDir()}
	if os.Getenv("KEEP") == "1" {
		e.dir, err = os.MkdirTemp("", "tether-e2e-kind-")
		if err != nil {
			t.Fatal(err)
		}
	}
	// What an earlier run killed midway left goes first: the snapshot is
	// of the host without it.
	kind.CleanStale(t.Logf)
	before := kind.TakeSnapshot(hostSkip()...)
	start := time.Now()
	e.d, err = kind.Start(ctx, kind.Options{Private: os.Getenv("TETHER_KIND_DOCKER") == "private", Logf: t.Logf})
	if errors.Is(err, kind.ErrNoDocker) {
		t.Skipf("no docker engine here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING docker engine (%s): %v", map[bool]string{true: "private", false: "the user's"}[e.d.Private()], since(start))
	keep := os.Getenv("KEEP") == "1"
	t.Cleanup(func() {
		if keep {
			return
		}
		start := time.Now()
		ctx := context.Background()
		if out, err := e.run(ctx, "", e.kind, "delete", "cluster", "--name", clusterName(), "--kubeconfig", e.kubeconfig); err != nil {
			t.Errorf("kind delete cluster: %v\n%s", err, out)
		}
		if err := e.d.Stop(ctx); err != nil {
			t.Errorf("stopping docker: %v", err)
		}
		t.Logf("TIMING tear-down: %v", since(start))
		if e.d.Private() {
			if diff := kind.Diff(before, kind.TakeSnapshot(hostSkip()...)); len(diff) > 0 {
				t.Errorf("the host changed:\n%s", strings.Join(diff, "\n"))
			}
		}
	})

	e.kind, err = kind.KindBinary(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	e.bin = filepath.Join(e.dir, "bin")
	if err := os.MkdirAll(e.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	kubectl, err := tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{e.kind, kubectl} {
		if err := os.Symlink(p, filepath.Join(e.bin, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}

	image := os.Getenv("KIND_NODE_IMAGE")
	if image == "" {
		e.ownImage = true
		image = e.loadNodeImage(t, ctx, root)
	}
	cfg := filepath.Join(e.dir, "kind.yaml")
	if err := os.WriteFile(cfg, []byte(kindConfig(e.ownImage)), 0o644); err != nil {
		t.Fatal(err)
	}
	e.kubeconfig = filepath.Join(e.dir, "kubeconfig")
	start = time.Now()
	out, err := e.run(ctx, "", e.kind, "create", "cluster", "--name", clusterName(), "--image", image,
		"--config", cfg, "--kubeconfig", e.kubeconfig, "--wait", "3m")
	if err != nil {
		t.Fatalf("kind create cluster: %v\n%s", err, out)
	}
	t.Logf("TIMING kind create cluster (3 nodes): %v", since(start))
	if keep {
		how := "KUBECONFIG=" + e.kubeconfig + " kubectl get nodes"
		if e.d.Private() {
			how = fmt.Sprintf("nsenter -t %d -n env KUBECONFIG=%s kubectl get nodes (the private docker engine: DOCKER_HOST=%s)",
				e.d.NetnsPID(), e.kubeconfig, e.d.Host())
		}
		t.Logf("KEEP=1: the cluster stays up: %s; remove it with %s delete cluster --name %s", how, e.kind, clusterName())
	}
	e.client = e.clientset(t)
	out, err = e.run(ctx, "", e.kind, "get", "nodes", "--name", clusterName())
	if err != nil {
		t.Fatal(err)
	}
	e.nodes = strings.Fields(out)
	return e
}

// loadNodeImage builds tether's node image and loads it into docker,
// unless docker has it already (the same ID: the same bytes).
func (e *env) loadNodeImage(t *testing.T, ctx context.Context, root string) string {
	t.Helper()
	start := time.Now()
	// TETHER_KIND_CACHE moves the node image's cache (.cache/kind) out of
	// the clone: CI keeps it per machine.
	o := kindnode.Options{Root: root, Cache: os.Getenv("TETHER_KIND_CACHE"), Log: func(f string, a ...any) { t.Logf("kind-image: "+f, a...) }}
	id, err := kindnode.Build(ctx, o, nilWriter{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := e.d.Docker(ctx, "image", "inspect", "-f", "{{.Id}}", id.Ref); strings.TrimSpace(got) == id.ID {
		t.Logf("TIMING node image %s %s: %v (docker has it)", id.Ref, id.ID, since(start))
		return id.Ref
	}
	cmd := e.d.Command(ctx, "docker", "load")
	pipe, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := kindnode.Build(ctx, o, pipe); err != nil {
		t.Fatal(err)
	}
	pipe.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("docker load: %v\n%s", err, out.String())
	}
	t.Logf("TIMING node image %s %s built and loaded: %v", id.Ref, id.ID, since(start))
	return id.Ref
}

type nilWriter struct{}

func (nilWriter) Write(p []byte) (int, error) { return len(p), nil }

// run runs a program with the test's bin folder first on PATH, KUBECONFIG
// set, in dir, and where the docker engine's published ports are reachable.
func (e *env) run(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := e.d.Command(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, "PATH="+e.bin+":"+os.Getenv("PATH"), "KUBECONFIG="+e.kubeconfig, "KIND_CLUSTER_NAME="+clusterName())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// clientset reaches the API server through the engine's network.
func (e *env) clientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return e.d.DialContext(ctx, network, addr)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tool finds a pinned tool: TOOLS_BIN, then .cache/tools/bin, then PATH.
func tool(name string) (string, error) {
	root, err := kind.RepoRoot()
	if err != nil {
		return "", err
	}
	for _, dir := range []string{os.Getenv("TOOLS_BIN"), filepath.Join(root, ".cache", "tools", "bin")} {
		if dir == "" {
			continue
		}
		if p := filepath.Join(dir, name); isExec(p) {
			return filepath.Abs(p)
		}
	}
	return exec.LookPath(name)
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

// hostSkip are mount points the host check ignores: others' work on a
// shared machine (TETHER_KIND_HOSTCHECK_SKIP, colon-separated).
func hostSkip() []string { return strings.Split(os.Getenv("TETHER_KIND_HOSTCHECK_SKIP"), ":") }

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }
