package kind

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tether-csi/tether/internal/release"
)

// RegistryOptions says how StartRegistry wires the registry; zero values
// are kind's documented ones.
type RegistryOptions struct {
	// Name is the container's name and its host name on Network
	// (default "kind-registry").
	Name string
	// Network is kind's docker network (default "kind").
	Network string
	// HostPort is published on 127.0.0.1 (default 5001).
	HostPort int
	// CreateNetwork creates Network when missing (kind then uses it as it
	// is); otherwise call Connect once kind has made it.
	CreateNetwork bool
}

// RegistryImage is the registry's image reference in the engine.
const RegistryImage = "localhost/tether-kind-registry:1"

// ContainerdConfigPatch is the kind Config's containerdConfigPatches entry
// that makes nodes read the hosts.toml files ConfigureNodes writes.
const ContainerdConfigPatch = `[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
`

// Registry is a registry container beside a kind cluster, as kind's docs
// run one: the host pushes to Addr (localhost:5001), nodes pull through
// Addr too, which their containerd maps to http://<Name>:5000 on Network.
type Registry struct {
	d       *Docker
	opts    RegistryOptions
	created bool // StartRegistry created the network
	// Addr is the registry's address on the host: localhost:<HostPort>.
	Addr string
}

// StartRegistry builds the registry's image (registryd, static), loads
// it, and runs it as opts.Name, published on 127.0.0.1:opts.HostPort and
// connected to opts.Network when that exists (or opts.CreateNetwork).
func StartRegistry(ctx context.Context, d *Docker, opts RegistryOptions) (*Registry, error) {
	if opts.Name == "" {
		opts.Name = "kind-registry"
	}
	if opts.Network == "" {
		opts.Network = "kind"
	}
	if opts.HostPort == 0 {
		opts.HostPort = 5001
	}
	r := &Registry{d: d, opts: opts, Addr: fmt.Sprintf("localhost:%d", opts.HostPort)}
	start := time.Now()
	img, err := registryImage(ctx)
	if err != nil {
		return nil, err
	}
	if err := LoadImage(ctx, d, RegistryImage, img); err != nil {
		return nil, err
	}
	if _, err := d.Docker(ctx, "run", "-d", "--restart=always", "--name", opts.Name, "--network", "bridge",
		"-p", fmt.Sprintf("127.0.0.1:%d:5000", opts.HostPort), RegistryImage); err != nil {
		return nil, err
	}
	if _, err := d.Docker(ctx, "network", "inspect", opts.Network); err != nil && opts.CreateNetwork {
		if _, err := d.Docker(ctx, "network", "create", opts.Network); err != nil {
			return r, err
		}
		r.created = true
	}
	if err := r.Connect(ctx); err != nil && (r.created || !strings.Contains(err.Error(), "not found")) {
		return r, err
	}
	// Wait until it answers on the host's port.
	client := &http.Client{Transport: r.Transport(), Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get("http://" + r.Addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("the registry does not answer on %s: %v", r.Addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.logf("registry %s up on %s and %s:5000 in %v", opts.Name, r.Addr, opts.Name, time.Since(start).Round(time.Millisecond))
	return r, nil
}

// Connect joins the registry to the kind network, if not yet on it.
func (r *Registry) Connect(ctx context.Context) error {
	out, err := r.d.Docker(ctx, "inspect", "-f", "{{json .NetworkSettings.Networks}}", r.opts.Name)
	if err != nil {
		return err
	}
	if strings.Contains(out, `"`+r.opts.Network+`"`) {
		return nil
	}
	_, err = r.d.Docker(ctx, "network", "connect", r.opts.Network, r.opts.Name)
	return err
}

// InNetwork is the registry's address from containers on the kind
// network: <Name>:5000.
func (r *Registry) InNetwork() string { return r.opts.Name + ":5000" }

// HostsTOML is the containerd hosts.toml that sends pulls of Addr to
// http://<Name>:5000.
func (r *Registry) HostsTOML() string { return fmt.Sprintf("[host.\"http://%s\"]\n", r.InNetwork()) }

// ConfigureNodes writes HostsTOML into every node container, at
// /etc/containerd/certs.d/<Addr>/hosts.toml.
func (r *Registry) ConfigureNodes(ctx context.Context, nodes ...string) error {
	dir := "/etc/containerd/certs.d/" + r.Addr
	for _, node := range nodes {
		cmd := r.d.Command(ctx, r.d.client, "exec", "-i", node, "sh", "-c", `mkdir -p "$1" && cat >"$1/hosts.toml"`, "sh", dir)
		cmd.Stdin = strings.NewReader(r.HostsTOML())
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("writing %s/hosts.toml into %s: %v: %s", dir, node, err, out)
		}
	}
	return nil
}

// HostingConfigMap is kube-public's local-registry-hosting ConfigMap (KEP
// 1755), which tells tools where to push.
func (r *Registry) HostingConfigMap() string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: local-registry-hosting
  namespace: kube-public
data:
  localRegistryHosting.v1: |
    host: "%s"
    help: "https://kind.sigs.k8s.io/docs/user/local-registry/"
`, r.Addr)
}

// Transport is an HTTP transport that reaches Addr from this process
// (through the engine's network namespace when private): pass it to
// go-containerregistry's remote.WithTransport to push.
func (r *Registry) Transport() http.RoundTripper {
	return &http.Transport{DialContext: r.d.DialContext, DisableKeepAlives: true}
}

// Remove removes the registry container, and the network if
// StartRegistry created it.
func (r *Registry) Remove(ctx context.Context) error {
	if _, err := r.d.Docker(ctx, "rm", "-f", "-v", r.opts.Name); err != nil {
		return err
	}
	if r.created {
		_, err := r.d.Docker(ctx, "network", "rm", r.opts.Network)
		return err
	}
	return nil
}

// registryImage builds registryd statically and packs it as tether's
// images are packed (internal/release: /app, non-root, reproducible).
func registryImage(ctx context.Context) (v1.Image, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "registryd-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "registryd")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./test/kind/registryd")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./test/kind/registryd: %v: %s", err, out)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	return release.NewImage(release.ImageSpec{Binary: binary, Platform: v1.Platform{OS: "linux", Architecture: goarch()},
		Version: "test", Created: time.Unix(0, 0).UTC()})
}

func goarch() string { return runtime.GOARCH }
