package e2ekind

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/internal/release"
	"github.com/tether-csi/tether/test/cluster"
)

// The README's install blocks are marked for this test.
const (
	readmePush = "<!-- make e2e-kind runs this block (registry localhost:5001/tether) -->"
	readmeLoad = "<!-- make e2e-kind runs this block -->"
	// readmeKind marks the README's kind config, whose nodes the test's
	// cluster has.
	readmeKind = "<!-- make e2e-kind makes its cluster with these nodes -->"
	// readmeRegistry is the registry the README's push block names; the
	// test pushes to pushRegistry instead.
	readmeRegistry = "registry.example.com/tether"
	pushRegistry   = "localhost:5001/tether"
	// deployMove marks docs/deploy.md's step from the push recipe to the
	// load recipe.
	deployMove = "<!-- make e2e-kind runs this block (registry localhost:5001/tether), after the push block -->"
)

// readmeBlock is the shell block that follows marker in the README.
func readmeBlock(t *testing.T, root, marker string) []string {
	t.Helper()
	return docBlock(t, root, "README.md", marker)
}

// docBlock is the shell or YAML block that follows marker in the
// repository's file doc.
func docBlock(t *testing.T, root, doc, marker string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	state := 0 // 0: before the marker, 1: before the fence, 2: in the block
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && strings.TrimSpace(line) == marker:
			state = 1
		case state == 1 && (line == "```sh" || line == "```yaml"):
			state = 2
		case state == 1 && strings.TrimSpace(line) != "":
			t.Fatalf("%s: %q is not followed by a ```sh or ```yaml block", doc, marker)
		case state == 2 && line == "```":
			return lines
		case state == 2:
			lines = append(lines, line)
		}
	}
	t.Fatalf("%s: no block marked %q", doc, marker)
	return nil
}

// userLine is a README line as this test runs it: the bundle's version,
// this machine's os_arch, the test's registry.
func userLine(line, version string) string {
	r := strings.NewReplacer(
		"vX.Y.Z", version,
		"linux_amd64", runtime.GOOS+"_"+runtime.GOARCH,
		release.ManifestsFile(readmeRegistry), release.ManifestsFile(pushRegistry),
		readmeRegistry, pushRegistry)
	return r.Replace(line)
}

// bundleVersion is the version the test's release is built as: the
// CHANGELOG's Unreleased version with a pre-release suffix.
const bundleVersion = "v0.1.0-kind"

// makeRelease runs `make release` as the README says and returns the
// bundle's folder.
func makeRelease(t *testing.T, ctx context.Context, root string) string {
	t.Helper()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "make", "-C", root, "release", "VERSION="+bundleVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	t.Logf("TIMING make release VERSION=%s: %v", bundleVersion, since(start))
	return filepath.Join(root, "_out", "release", bundleVersion)
}

// runReadme runs one of the README's blocks in the bundle, as a user's
// shell would (bash, stopping at the first failure).
func (e *env) runReadme(t *testing.T, ctx context.Context, root, bundle, marker string) {
	t.Helper()
	e.runBlock(t, ctx, root, bundle, "README.md", marker)
}

// runBlock runs the block marked marker in the repository's file doc, in
// the bundle, as runReadme does.
func (e *env) runBlock(t *testing.T, ctx context.Context, root, bundle, doc, marker string) {
	t.Helper()
	var script []string
	for _, l := range docBlock(t, root, doc, marker) {
		script = append(script, userLine(l, bundleVersion))
	}
	start := time.Now()
	out, err := e.run(ctx, bundle, "bash", "-euo", "pipefail", "-c", strings.Join(script, "\n"))
	if err != nil {
		t.Fatalf("%s's block failed: %v\n--- script\n%s\n--- output\n%s", doc, err, strings.Join(script, "\n"), out)
	}
	t.Logf("TIMING %s's block (%d lines): %v\n%s", doc, len(script), since(start), out)
}

// loadStandIns loads the csi-test mock driver's image (the own-driver
// recipe's) and, on tether's node image (no registry reachable), what a
// node lacks: the images tether.yaml names beside tether's own
// (node-driver-registrar, made from examples/local-driver/registrar) and
// the busybox examples/ run.
func (e *env) loadStandIns(t *testing.T, ctx context.Context, bundle string) {
	t.Helper()
	manifests, err := os.ReadFile(filepath.Join(bundle, "tether.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	registrar := regexp.MustCompile(`image: (\S*csi-node-driver-registrar\S*)`).FindSubmatch(manifests)
	if registrar == nil {
		t.Fatal("tether.yaml names no node-driver-registrar")
	}
	start := time.Now()
	dir := t.TempDir()
	// The mock driver is on no registry: every cluster needs it loaded.
	images := []cluster.Image{cluster.MockDriverNodeImage(t)}
	if e.ownImage {
		images = append(images, cluster.StandInImages(t)...)
	}
	for _, img := range images {
		switch img.Ref {
		case cluster.RegistrarImage:
			img.Ref = string(registrar[1])
		case cluster.ExamplesBusyboxImage, cluster.MockDriverImage:
		default:
			continue
		}
		archive := filepath.Join(dir, fmt.Sprintf("standin-%d.tar", len(img.Ref)))
		if err := img.WriteArchive(archive); err != nil {
			t.Fatal(err)
		}
		if out, err := e.run(ctx, "", e.kind, "load", "image-archive", archive); err != nil {
			t.Fatalf("kind load image-archive %s: %v\n%s", img.Ref, err, out)
		}
		t.Logf("stand-in %s loaded", img.Ref)
	}
	t.Logf("TIMING stand-in images: %v", since(start))
}

// waitTether waits until tether runs: the binder's replicas ready and the
// driver's DaemonSet ready on every node, its CSI driver registered with
// every kubelet.
func (e *env) waitTether(t *testing.T, ctx context.Context) {
	t.Helper()
	start := time.Now()
	const ns = cluster.DeployNamespace
	e.eventually(t, ctx, 5*time.Minute, "tether running", func(ctx context.Context) (bool, string) {
		d, err := e.client.AppsV1().Deployments(ns).Get(ctx, "tether-binder", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ds, err := e.client.AppsV1().DaemonSets(ns).Get(ctx, "tether-local", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		state := fmt.Sprintf("binder %d/%d ready, driver %d/%d ready", d.Status.ReadyReplicas, *d.Spec.Replicas, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
		// The spec applied is the one running: rolled out, every pod ready.
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != *d.Spec.Replicas ||
			d.Status.ReadyReplicas != *d.Spec.Replicas || d.Status.Replicas != *d.Spec.Replicas ||
			ds.Status.ObservedGeneration != ds.Generation || ds.Status.DesiredNumberScheduled == 0 ||
			ds.Status.UpdatedNumberScheduled != ds.Status.DesiredNumberScheduled || ds.Status.NumberReady != ds.Status.DesiredNumberScheduled {
			return false, state
		}
		// Every node the DaemonSet runs on (the workers: the control plane
		// is tainted) has the driver registered with its kubelet.
		registered := 0
		for _, n := range e.nodes {
			if cn, err := e.client.StorageV1().CSINodes().Get(ctx, n, metav1.GetOptions{}); err == nil && len(cn.Spec.Drivers) > 0 {
				registered++
			}
		}
		if registered != int(ds.Status.DesiredNumberScheduled) {
			return false, fmt.Sprintf("%s, the driver registered on %d nodes", state, registered)
		}
		return true, state
	})
	t.Logf("TIMING tether running: %v", since(start))
}

// eventually polls cond every second until it holds or timeout passes.
func (e *env) eventually(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		ok, state := cond(ctx)
		if ok {
			return
		}
		last = state
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v: %s\n%s", what, timeout, last, e.dump(context.Background()))
		case <-time.After(time.Second):
		}
	}
}

// dump is what a failure needs: pods, events and claims.
func (e *env) dump(ctx context.Context) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "pods", "-A", "-o", "wide"}, {"get", "pvc,pv", "-A"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"-n", cluster.DeployNamespace, "logs", "-l", "app.kubernetes.io/name=tether-binder", "--tail=40", "--all-containers"},
	} {
		out, _ := e.run(ctx, "", "kubectl", args...)
		fmt.Fprintf(&b, "--- kubectl %s\n%s", strings.Join(args, " "), out)
	}
	return b.String()
}
