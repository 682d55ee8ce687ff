package cluster

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Image is a container image made on this machine from local files (there
// is no registry): a docker-archive tar that containerd imports.
type Image struct {
	// Ref is its reference, e.g. "localhost/busybox:1" (a tag other than
	// latest: kubelet never tries to pull it).
	Ref string
	// Files maps paths in the image to files on this machine; Links maps
	// paths to symlink targets; Text maps paths to contents.
	Files, Links, Text map[string]string
	Entrypoint         []string
	// User is the image's user ("65532:65532" as distroless nonroot).
	User string
	// Archive, if set, is an image archive made elsewhere (tether's own
	// images, by internal/release as `make images` makes them): imported
	// as it is, the fields above unused; IDs are its digests (index,
	// manifest and config), one of which a pod running it reports as its
	// imageID; Pin is Ref@<index digest>, as tether.yaml names it.
	Archive string
	IDs     []string
	Pin     string
}

// The images a real node has. Our components' refs are what the e2e's
// kustomize overlay sets.
const (
	PauseImage   = "localhost/pause:3.10"
	BusyboxImage = "localhost/busybox:1"
	// ExamplesBusyboxImage is the busybox examples/ use, made locally.
	ExamplesBusyboxImage = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"
	// tether's images: internal/release's, tagged e2e under this registry.
	BinderImage      = ReleaseRegistry + "/binder:e2e"
	ProvisionerImage = ReleaseRegistry + "/provisioner:e2e"
	DriverImage      = ReleaseRegistry + "/local-driver:e2e"
	RegistrarImage   = "localhost/tether-registrar:e2e"
)

// nonroot is distroless nonroot's user, the shipped images' (see Dockerfile).
const nonroot = "65532:65532"

var (
	staticMu    sync.Mutex
	staticCache = map[string]string{}
)

// BuildStatic builds a main package of this module without cgo (and so
// without the race detector), for an image with nothing but the binary.
// The binary goes when the test ends (images keep their own copy); a
// later test of the same binary builds it again, from Go's build cache.
func BuildStatic(t T, pkg string) string {
	t.Helper()
	staticMu.Lock()
	defer staticMu.Unlock()
	if path, ok := staticCache[pkg]; ok {
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tether-static-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, filepath.Base(strings.TrimSuffix(pkg, "/")))
	cmd := exec.Command("go", "build", "-trimpath", "-o", path, pkg)
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	staticCache[pkg] = path
	return path
}

// NodeImages are the images every real node gets: pause, busybox, and
// tether's binder, provisioner, local driver and registrar.
func NodeImages(t T) []Image {
	t.Helper()
	return append(StandInImages(t), ReleaseImages(t)...)
}

// StandInImages are the images a node without a registry needs beside
// tether's own: pause, busybox (also under the reference examples/ name)
// and the registrar, examples/local-driver/registrar, which stands in for
// node-driver-registrar.
func StandInImages(t T) []Image {
	t.Helper()
	busybox := Image{Ref: BusyboxImage, Files: map[string]string{"bin/busybox": "/bin/busybox"}, Links: map[string]string{},
		Text: map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
			"etc/group": "root:x:0:\nnobody:x:65534:\n"}, Entrypoint: []string{"/bin/sh"}}
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatalf("busybox (Debian's busybox-static) --list: %v", err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			busybox.Links["bin/"+applet] = "busybox"
		}
	}
	examples := busybox // examples/ name the upstream e2e busybox
	examples.Ref = ExamplesBusyboxImage
	return []Image{
		{Ref: PauseImage, Files: map[string]string{"pause": BuildStatic(t, "./hack/images/pause")}, Entrypoint: []string{"/pause"}},
		busybox, examples,
		{Ref: RegistrarImage, Files: map[string]string{"app": BuildStatic(t, "./examples/local-driver/registrar")}, Entrypoint: []string{"/app"}},
	}
}

// WriteArchive writes the image as a docker-archive tar: manifest.json,
// the config, and one layer.
func (img Image) WriteArchive(path string) error {
	layer, err := os.CreateTemp(filepath.Dir(path), "layer-")
	if err != nil {
		return err
	}
	defer os.Remove(layer.Name())
	defer layer.Close()
	sum := sha256.New()
	if err := img.writeLayer(io.MultiWriter(layer, sum)); err != nil {
		return err
	}
	diffID := "sha256:" + hex.EncodeToString(sum.Sum(nil))
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": img.Entrypoint, "User": img.User,
			"Env": []string{"PATH=/bin:/usr/bin:/sbin:/usr/sbin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{img.Ref}, "Layers": []string{"layer.tar"}}})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {configName, config}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	st, err := layer.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "layer.tar", Mode: 0o644, Size: st.Size()}); err != nil {
		return err
	}
	if _, err := layer.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(tw, layer); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// writeLayer writes the image's one layer: folders, files, links, texts.
func (img Image) writeLayer(w io.Writer) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{"tmp": true}
	var names []string
	for _, m := range []map[string]string{img.Files, img.Links, img.Text} {
		for name := range m {
			names = append(names, name)
			for d := filepath.Dir(name); d != "."; d = filepath.Dir(d) {
				dirs[d] = true
			}
		}
	}
	var dirNames []string
	for d := range dirs {
		dirNames = append(dirNames, d)
	}
	sort.Strings(dirNames)
	sort.Strings(names)
	for _, d := range dirNames {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: mode}); err != nil {
			return err
		}
	}
	for _, name := range names {
		if target, ok := img.Links[name]; ok {
			if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}); err != nil {
				return err
			}
			continue
		}
		var data []byte
		mode := int64(0o644)
		if text, ok := img.Text[name]; ok {
			data = []byte(text)
		} else {
			var err error
			if data, err = os.ReadFile(img.Files[name]); err != nil {
				return err
			}
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return tw.Close()
}
