package release

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A containerd of the test's own: its root, state, sockets and plugin
// folder in a temporary folder, in a mount namespace of its own (its
// overlay mounts, made while it unpacks, never show on the host), with
// the CRI plugin a kubelet talks to. Nothing runs in it: images are
// imported, unpacked and looked up. The config's version 2 is read by
// containerd 1.6 and 2.x alike.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[6]q
`

// containerdBin is where the test finds containerd and ctr: the folder
// TETHER_CONTAINERD_BIN names (e.g. a containerd 2 built from the Go
// module proxy), else PATH (Debian 12's containerd is 1.6).
func containerdBin(t *testing.T, name string) string {
	t.Helper()
	if dir := os.Getenv("TETHER_CONTAINERD_BIN"); dir != "" {
		return filepath.Join(dir, name)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("no %s (apt-get install containerd): %v", name, err)
	}
	return p
}

// startContainerd starts a containerd for the test and returns its
// socket and its ctr; the test is skipped where containerd cannot run
// (not root, or no containerd and ctr: apt-get install containerd).
func startContainerd(t *testing.T) (sock, ctr string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("containerd needs root")
	}
	containerd, ctr := containerdBin(t, "containerd"), containerdBin(t, "ctr")
	dir, err := os.MkdirTemp("", "tcd-") // a unix socket's path must stay short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock = filepath.Join(dir, "c.sock")
	for _, d := range []string{"root", "state", "opt", "cni"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	config := fmt.Sprintf(containerdConfig, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock,
		filepath.Join(dir, "t.sock"), filepath.Join(dir, "opt"), filepath.Join(dir, "cni"))
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", containerd, "--config", filepath.Join(dir, "config.toml"))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("containerd's log:\n%s", logs.String())
		}
	})
	poll(t, 30*time.Second, "containerd serving", func() (bool, error) {
		select {
		case err := <-exited:
			exited <- err
			return false, fmt.Errorf("containerd exited: %v", err)
		default:
		}
		return exec.Command(ctr, "-a", sock, "version").Run() == nil, nil
	})
	return sock, ctr
}

// poll calls f until it is done, fails, or the deadline passes.
func poll(t *testing.T, within time.Duration, what string, f func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		done, err := f()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		<-tick.C
	}
}

// TestContainerdImportResolvesThePin imports the host platform's archive
// into a real containerd, as a user does on a node (`ctr -n k8s.io images
// import`) and as `kind load image-archive` does (kind v0.33's command:
// --all-platforms --digests, from stdin), then asks containerd's CRI, as
// a kubelet does before it would pull, for tether.yaml's pin
// <repo>:<tag>@<index digest>: it must be there, with the host
// platform's image, so no pull is needed. The bundle is built
// arm64-first, the order make release does not use by default.
func TestContainerdImportResolvesThePin(t *testing.T) {
	host := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("no archive for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	dir := t.TempDir()
	const ref = "registry.example.com/tether/binder:v0.1.0" // never reachable: a pull would fail
	b := testBundle(t, dir, ref, "", arm64, amd64)
	archive := filepath.Join(dir, b.File)
	pin := ref + "@" + b.Digest
	byDigest := "registry.example.com/tether/binder@" + b.Digest
	// The control: the same archive naming only <repo>:<tag> (as archives
	// did before) leaves the pin unresolved, and a kubelet would pull.
	tagOnly := filepath.Join(t.TempDir(), "tag-only.oci.tar")
	withoutDigestName(t, archive, tagOnly)
	for _, tc := range []struct {
		name    string
		archive string
		args    []string
		stdin   bool
		pinned  bool
	}{
		{"ctr images import", archive, []string{"images", "import"}, false, true},
		{"kind load image-archive", archive, []string{"images", "import", "--all-platforms", "--digests", "--snapshotter=overlayfs"}, true, true},
		{"tag name only", tagOnly, []string{"images", "import"}, false, false},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "-"), func(t *testing.T) {
			sock, ctr := startContainerd(t)
			args := append([]string{"-a", sock, "-n", "k8s.io"}, tc.args...)
			if tc.stdin {
				args = append(args, "-")
			} else {
				args = append(args, tc.archive)
			}
			cmd := exec.CommandContext(t.Context(), ctr, args...)
			if tc.stdin {
				f, err := os.Open(tc.archive)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				cmd.Stdin = f
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("ctr %s: %v\n%s", strings.Join(tc.args, " "), err, out)
			}
			out, err := exec.CommandContext(t.Context(), ctr, "-a", sock, "-n", "k8s.io", "images", "ls").CombinedOutput()
			if err != nil {
				t.Fatalf("ctr images ls: %v\n%s", err, out)
			}
			t.Logf("ctr images ls:\n%s", out)
			for _, name := range []string{ref, byDigest} {
				if has := hasImage(string(out), name, b.Digest); has != (tc.pinned || name == ref) {
					t.Errorf("containerd has image %s with target %s: %v", name, b.Digest, has)
				}
			}

			conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			images := cri.NewImageServiceClient(conn)
			status := func(image string) (*cri.ImageStatusResponse, error) {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				return images.ImageStatus(ctx, &cri.ImageStatusRequest{Image: &cri.ImageSpec{Image: image}})
			}
			// CRI learns of imported images from containerd's events: once
			// it knows the tag, it knows every name the import made.
			poll(t, 30*time.Second, "CRI ImageStatus("+ref+")", func() (bool, error) {
				st, err := status(ref)
				return err == nil && st.Image != nil, nil
			})
			st, err := status(pin)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.pinned {
				if st.Image != nil {
					t.Errorf("CRI resolves %s without the digest name: %v", pin, st.Image)
				}
				return
			}
			if st.Image == nil {
				t.Fatalf("CRI does not resolve %s: a kubelet would pull it", pin)
			}
			want := testImage(t, "binary-"+host.Architecture, host)
			cfg, err := want.ConfigName()
			if err != nil {
				t.Fatal(err)
			}
			if st.Image.Id != cfg.String() {
				t.Errorf("CRI resolves %s to image %s, want the %s image's config %s", pin, st.Image.Id, host.Architecture, cfg)
			}
			if !strings.Contains(strings.Join(st.Image.RepoDigests, " "), byDigest) {
				t.Errorf("CRI's repo digests %q lack %s", st.Image.RepoDigests, byDigest)
			}
			t.Logf("CRI: %s is image %s, tags %q, digests %q", pin, st.Image.Id, st.Image.RepoTags, st.Image.RepoDigests)
		})
	}
}

// withoutDigestName copies an archive, leaving out of its index.json the
// <repo>@<digest> name.
func withoutDigestName(t *testing.T, src, dst string) {
	t.Helper()
	files := tarFiles(t, src)
	var top v1.IndexManifest
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	top.Manifests = top.Manifests[:1]
	data, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	files["index.json"] = data
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(name, "/") {
			continue // folders: the importer reads files only
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hasImage says whether `ctr images ls` lists name with that target.
func hasImage(ls, name, target string) bool {
	for _, line := range strings.Split(ls, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == name && f[2] == target {
			return true
		}
	}
	return false
}
