package kindnode

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The node layer is the same bytes for the same entries, whatever order
// they come in, and names every parent folder.
func TestLayerIsDeterministic(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	es := []entry{
		{Name: "usr/bin/prog", Mode: 0o755, From: bin},
		{Name: "etc/x/y.conf", Mode: 0o644, Data: []byte("y")},
		{Name: "etc/systemd/system/multi-user.target.wants/a.service", Link: "/etc/systemd/system/a.service"},
	}
	rev := []entry{es[2], es[1], es[0]}
	epoch := time.Unix(1, 0)
	var a, b bytes.Buffer
	if err := writeLayer(&a, es, epoch); err != nil {
		t.Fatal(err)
	}
	if err := writeLayer(&b, rev, epoch); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same entries in another order gave other bytes")
	}
	var names []string
	tr := tar.NewReader(&a)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: time %v owner %d:%d, want the epoch and root", h.Name, h.ModTime, h.Uid, h.Gid)
		}
		names = append(names, h.Name)
	}
	want := "etc/ etc/systemd/ etc/systemd/system/ etc/systemd/system/multi-user.target.wants/ " +
		"etc/systemd/system/multi-user.target.wants/a.service etc/x/ etc/x/y.conf usr/ usr/bin/ usr/bin/prog"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("layer entries\n got %s\nwant %s", got, want)
	}
}

// The node layer holds what kind reads from a node image (/kind/version,
// the two manifests, an entrypoint that prints the line kind waits for),
// every embedded file, and enables only units it holds.
func TestNodeLayerKeepsKindsContract(t *testing.T) {
	o := Options{KubernetesVersion: "v1.36.3"}
	es, err := nodeEntries(o, "/nonexistent/bin", "/nonexistent/images.tar")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]entry{}
	for _, e := range es {
		byName[e.Name] = e
	}
	if got := string(byName["kind/version"].Data); got != "v1.36.3" {
		t.Errorf("/kind/version = %q", got)
	}
	for _, n := range []string{"kind/manifests/default-cni.yaml", "kind/manifests/default-storage.yaml", "usr/bin/kubeadm", "usr/bin/kubelet", "usr/bin/kubectl", "kind/images/images.tar"} {
		if _, ok := byName[n]; !ok {
			t.Errorf("the node layer has no /%s", n)
		}
	}
	if ep := string(byName["usr/local/bin/entrypoint"].Data); !strings.Contains(ep, `log "detected cgroup v1"`) || !strings.Contains(ep, `exec "$@"`) {
		t.Error("the entrypoint neither says \"detected cgroup v1\" (kind waits for it) nor execs init")
	}
	for _, e := range es {
		if e.Link == "" {
			continue
		}
		if _, ok := byName[strings.TrimPrefix(e.Link, "/")]; !ok {
			t.Errorf("%s links to %s, which the layer does not hold", e.Name, e.Link)
		}
	}
}

// The pins are those `kubeadm config images list` printed for v1.36.3,
// less CoreDNS, and containerd's sandbox image is the pause the node has.
func TestControlPlaneImagesAreKubeadms(t *testing.T) {
	var got []string
	for _, ci := range controlPlaneImages("v1.36.3") {
		got = append(got, ci.Ref)
	}
	want := []string{"registry.k8s.io/kube-apiserver:v1.36.3", "registry.k8s.io/kube-controller-manager:v1.36.3",
		"registry.k8s.io/kube-scheduler:v1.36.3", "registry.k8s.io/kube-proxy:v1.36.3",
		"registry.k8s.io/etcd:3.6.8-0", "registry.k8s.io/pause:3.10.2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("images\n got %v\nwant %v", got, want)
	}
	toml, err := files.ReadFile("files/etc/containerd.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(toml), `sandbox_image = "registry.k8s.io/pause:`+PauseTag+`"`) {
		t.Error("containerd's sandbox_image is not the pause image the node carries")
	}
}

// prune keeps what a build uses (and the digests beside it) and removes
// the rest of what builds make, nothing else.
func TestPruneKeepsWhatTheBuildUses(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"node-rootfs-a.tar", "node-rootfs-a.tar.sha256", "node-rootfs-old.tar", "bin-a/", "bin-old/",
		"images-a.tar", "images-old.tar", "node-layer-a.tar", "node-layer-old.tar", "node-layer-old.tar.sha256", "README", "node-layer-b.tmp.tar"} {
		p := filepath.Join(dir, n)
		var err error
		if strings.HasSuffix(n, "/") {
			err = os.MkdirAll(p, 0o755)
		} else {
			err = os.WriteFile(p, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	prune(Options{Cache: dir}, filepath.Join(dir, "node-rootfs-a.tar"), filepath.Join(dir, "bin-a"), filepath.Join(dir, "images-a.tar"), filepath.Join(dir, "node-layer-a.tar"))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := "README bin-a images-a.tar node-layer-a.tar node-layer-b.tmp.tar node-rootfs-a.tar node-rootfs-a.tar.sha256"
	if strings.Join(got, " ") != want {
		t.Errorf("after prune: %v, want %s", got, want)
	}
}
