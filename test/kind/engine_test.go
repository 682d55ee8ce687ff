package kind

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// hostSkip are mount points the host checks ignore: someone else's work
// on a shared machine (TETHER_KIND_HOSTCHECK_SKIP, colon-separated).
func hostSkip() []string { return strings.Split(os.Getenv("TETHER_KIND_HOSTCHECK_SKIP"), ":") }

// needKind skips unless TETHER_KIND=1: these tests start a docker engine.
func needKind(t *testing.T) {
	t.Helper()
	if os.Getenv("TETHER_KIND") != "1" {
		t.Skip("starts a docker engine: run with TETHER_KIND=1 (make e2e-kind)")
	}
}

// startPrivate starts a private engine or skips when none can run here.
func startPrivate(t *testing.T, ctx context.Context) *Docker {
	t.Helper()
	start := time.Now()
	d, err := Start(ctx, Options{Private: true, Logf: t.Logf})
	if errors.Is(err, ErrNoDocker) {
		t.Skipf("no private docker engine here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING dockerd start: %v", time.Since(start).Round(time.Millisecond))
	return d
}

// The private engine runs a privileged container and docker exec into it,
// serves the registry (a push from this process through the engine's
// namespace, a pull by name from a container on network kind, a pull by
// the engine itself from localhost:5001), and Stop leaves the host as it
// was.
func TestPrivateEngine(t *testing.T) {
	needKind(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before := TakeSnapshot(hostSkip()...)
	d := startPrivate(t, ctx)
	stopped := false
	defer func() {
		if !stopped {
			d.Stop(context.Background())
		}
	}()
	dir := d.eng.dir

	// busybox, privileged, and docker exec.
	start := time.Now()
	img, err := BusyboxImage()
	if err != nil {
		t.Skipf("no busybox image: %v", err)
	}
	const busybox = "localhost/busybox:1"
	if err := LoadImage(ctx, d, busybox, img); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING busybox load: %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if _, err := d.Docker(ctx, "run", "-d", "--privileged", "--name", "bb", busybox, "-c", "trap 'exit 0' TERM; sleep 3600 & wait"); err != nil {
		t.Fatal(err)
	}
	out, err := d.Docker(ctx, "exec", "bb", "sh", "-c", "echo hello from $(hostname); grep CapEff /proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING privileged busybox run + exec: %v; it says: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	if !strings.Contains(out, "hello from") {
		t.Errorf("docker exec said %q", out)
	}

	// The registry.
	start = time.Now()
	reg, err := StartRegistry(ctx, d, RegistryOptions{CreateNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING registry build+load+run: %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	pushed, err := name.NewTag(reg.Addr + "/busybox:pushed")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(pushed, img, remote.WithTransport(reg.Transport()), remote.WithContext(ctx)); err != nil {
		t.Fatalf("push to %s from the host: %v", pushed, err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING push %s (%s) from the host: %v", pushed, digest, time.Since(start).Round(time.Millisecond))

	// A container on network kind fetches the manifest from kind-registry:5000.
	out, err = d.Docker(ctx, "run", "--rm", "--network", "kind", busybox, "-c",
		"wget -q -O- --header 'Accept: application/vnd.docker.distribution.manifest.v2+json' http://"+reg.InNetwork()+"/v2/busybox/manifests/pushed | sha256sum")
	if err != nil {
		t.Fatal(err)
	}
	if got := "sha256:" + strings.Fields(out)[0]; got != digest.String() {
		t.Errorf("the manifest from %s has digest %s, want %s", reg.InNetwork(), got, digest)
	}
	// The engine pulls by the host's name, and runs it.
	start = time.Now()
	if _, err := d.Docker(ctx, "pull", pushed.String()); err != nil {
		t.Fatal(err)
	}
	if out, err := d.Docker(ctx, "run", "--rm", pushed.String(), "-c", "echo pulled"); err != nil || strings.TrimSpace(out) != "pulled" {
		t.Errorf("running the pulled image: %q, %v", out, err)
	}
	t.Logf("TIMING docker pull %s + run: %v", pushed, time.Since(start).Round(time.Millisecond))

	// hosts.toml into a "node" (busybox stands in for kind's node image).
	if err := reg.ConfigureNodes(ctx, "bb"); err != nil {
		t.Fatal(err)
	}
	if out, err := d.Docker(ctx, "exec", "bb", "cat", "/etc/containerd/certs.d/localhost:5001/hosts.toml"); err != nil || out != reg.HostsTOML() {
		t.Errorf("hosts.toml in the node: %q, %v; want %q", out, err, reg.HostsTOML())
	}

	// Mid-run, the host sees none of the engine's mounts or interfaces.
	during := Diff(before, TakeSnapshot(hostSkip()...))
	for _, line := range during {
		if strings.HasPrefix(line, "mount") || strings.HasPrefix(line, "interface") || strings.HasPrefix(line, "iptables") {
			t.Errorf("while running, the host changed: %s", line)
		}
	}
	t.Logf("while running, the host snapshot differs by:\n  %s", strings.Join(during, "\n  "))

	if err := reg.Remove(ctx); err != nil {
		t.Error(err)
	}
	start = time.Now()
	stopped = true
	if err := d.Stop(ctx); err != nil {
		t.Error(err)
	}
	t.Logf("TIMING stop: %v", time.Since(start).Round(time.Millisecond))
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the engine's folder %s is still there: %v", dir, err)
	}
	if diff := Diff(before, TakeSnapshot(hostSkip()...)); len(diff) > 0 {
		t.Errorf("the host changed:\n  %s", strings.Join(diff, "\n  "))
	}
}

// An engine whose owner died without Stop (a test binary killed by its
// -timeout) is removed by the next Start's CleanStale, leaving the host as
// it was.
func TestCleanStale(t *testing.T) {
	needKind(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before := TakeSnapshot(hostSkip()...)
	d := startPrivate(t, ctx)
	dir := d.eng.dir
	img, err := BusyboxImage()
	if err != nil {
		d.Stop(ctx)
		t.Skipf("no busybox image: %v", err)
	}
	if err := LoadImage(ctx, d, "localhost/busybox:1", img); err != nil {
		d.Stop(ctx)
		t.Fatal(err)
	}
	if _, err := d.Docker(ctx, "run", "-d", "--privileged", "-p", "127.0.0.1:5002:80", "localhost/busybox:1", "-c", "exec sleep 3600"); err != nil {
		d.Stop(ctx)
		t.Fatal(err)
	}
	// Its owner "dies".
	if err := os.WriteFile(dir+"/owner", []byte("999999999 0"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	CleanStale(t.Logf)
	d.eng.holder.Wait() // our child: reap it
	t.Logf("TIMING CleanStale: %v", time.Since(start).Round(time.Millisecond))
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the stale engine's folder %s is still there: %v", dir, err)
	}
	if diff := Diff(before, TakeSnapshot(hostSkip()...)); len(diff) > 0 {
		t.Errorf("the host changed:\n  %s", strings.Join(diff, "\n  "))
	}
}

// With DOCKER_HOST set, Start uses that engine as it is, and Stop leaves it
// running.
func TestUserDocker(t *testing.T) {
	needKind(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	private := startPrivate(t, ctx)
	defer private.Stop(context.Background())
	t.Setenv("DOCKER_HOST", private.Host())
	user, err := Start(ctx, Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if user.Private() || user.Host() != private.Host() {
		t.Fatalf("Start with DOCKER_HOST=%s gave %s (private %v)", private.Host(), user.Host(), user.Private())
	}
	if err := user.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := private.Docker(ctx, "version"); err != nil {
		t.Errorf("the user's engine does not answer after Stop: %v", err)
	}
}
