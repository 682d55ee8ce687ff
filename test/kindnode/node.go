package kindnode

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

//go:embed files
var files embed.FS

// Repository names the image; its tag is the Kubernetes version.
const Repository = "localhost/tether-kind-node"

// Options say where to build and what.
type Options struct {
	// Root is the repository (hack/tools pins the versions).
	Root string
	// Cache holds the root filesystems, binaries and layers between
	// builds; it defaults to <Root>/.cache/kind.
	Cache string
	// KubernetesVersion defaults to hack/tools/versions.env's.
	KubernetesVersion string
	// Epoch stamps every file and the config; it defaults to the Debian
	// snapshot's day, so a rebuild gives the same image ID.
	Epoch time.Time
	// Log, if set, is told each step that takes time.
	Log func(format string, args ...any)
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

// Image is a built node image.
type Image struct {
	// Ref is Repository:<Kubernetes version>.
	Ref string
	// ID is docker's image ID: the digest of the config, which names
	// every layer's digest, so equal IDs mean equal images.
	ID string
}

// Build makes the node image and writes it to w as a docker-archive (what
// `docker load` reads).
func Build(ctx context.Context, o Options, w io.Writer) (Image, error) {
	o, err := o.defaults()
	if err != nil {
		return Image{}, err
	}
	if err := os.MkdirAll(o.Cache, 0o755); err != nil {
		return Image{}, err
	}
	rootTar, err := nodeRootfs.build(ctx, o)
	if err != nil {
		return Image{}, err
	}
	baseTar, err := imageRootfs.build(ctx, o)
	if err != nil {
		return Image{}, err
	}
	bin, err := binaries(ctx, o)
	if err != nil {
		return Image{}, err
	}
	var refs []string
	for _, ci := range controlPlaneImages(o.KubernetesVersion) {
		refs = append(refs, ci.Ref)
	}
	imagesTar := filepath.Join(o.Cache, "images-"+keyOf(formatVersion, filepath.Base(bin), filepath.Base(baseTar), strings.Join(refs, " "))+".tar")
	if _, err := os.Stat(imagesTar); err != nil {
		o.logf("writing the control-plane images")
		if err := writeImages(imagesTar, baseTar, bin, o); err != nil {
			return Image{}, err
		}
	}
	entries, err := nodeEntries(o, bin, imagesTar)
	if err != nil {
		return Image{}, err
	}
	layerTar := filepath.Join(o.Cache, "node-layer-"+keyOf(formatVersion, filepath.Base(rootTar), filepath.Base(bin), filepath.Base(imagesTar), entriesKey(entries))+".tar")
	if _, err := os.Stat(layerTar); err != nil {
		o.logf("writing the node layer")
		if err := writeFile(layerTar, func(w io.Writer) error { return writeLayer(w, entries, o.Epoch) }); err != nil {
			return Image{}, err
		}
	}
	prune(o, rootTar, baseTar, bin, imagesTar, layerTar)
	layers := []string{rootTar, layerTar}
	var diffIDs []v1.Hash
	for _, l := range layers {
		h, err := fileDigest(l)
		if err != nil {
			return Image{}, err
		}
		diffIDs = append(diffIDs, h)
	}
	cfg := v1.ConfigFile{
		Architecture: runtime.GOARCH, OS: "linux", Created: v1.Time{Time: o.Epoch},
		Config: v1.Config{
			Entrypoint: []string{"/usr/local/bin/entrypoint", "/sbin/init"},
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "container=docker"},
			StopSignal: "SIGRTMIN+3",
		},
		RootFS: v1.RootFS{Type: "layers", DiffIDs: diffIDs},
		History: []v1.History{
			{Created: v1.Time{Time: o.Epoch}, CreatedBy: "mmdebstrap " + Suite},
			{Created: v1.Time{Time: o.Epoch}, CreatedBy: "tether: make kind-image"},
		},
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return Image{}, err
	}
	sum := sha256.Sum256(raw)
	img := Image{Ref: Repository + ":" + o.KubernetesVersion, ID: "sha256:" + hex.EncodeToString(sum[:])}
	return img, writeDockerArchive(w, img, raw, layers, diffIDs)
}

// nodeEntries are the node layer's files: this package's files/, the
// node's programs, /kind's contract files and the control-plane images.
func nodeEntries(o Options, bin, imagesTar string) ([]entry, error) {
	read := func(name string) []byte {
		data, err := files.ReadFile("files/" + name)
		if err != nil {
			panic(err) // embedded: present at build time
		}
		return data
	}
	sys := "etc/systemd/system/"
	es := []entry{
		{Name: "usr/local/bin/entrypoint", Mode: 0o755, Data: read("bin/entrypoint")},
		{Name: "kind/bin/import-images", Mode: 0o755, Data: read("bin/import-images")},
		{Name: "kind/bin/cni", Mode: 0o755, Data: read("bin/cni")},
		{Name: "kind/version", Mode: 0o644, Data: []byte(o.KubernetesVersion)},
		{Name: "kind/images/images.tar", Mode: 0o644, From: imagesTar},
		{Name: "kind/manifests/default-cni.yaml", Mode: 0o644, Data: read("etc/default-cni.yaml")},
		{Name: "kind/manifests/default-storage.yaml", Mode: 0o644, Data: read("etc/default-storage.yaml")},
		{Name: "etc/containerd/config.toml", Mode: 0o644, Data: read("etc/containerd.toml")},
		{Name: "etc/containerd/certs.d", Mode: 0o755, Dir: true},
		{Name: "etc/crictl.yaml", Mode: 0o644, Data: read("etc/crictl.yaml")},
		{Name: "etc/default/kubelet", Mode: 0o644, Data: read("etc/kubelet.default")},
		{Name: "etc/sysctl.d/10-kind.conf", Mode: 0o644, Data: read("etc/sysctl-kind.conf")},
		{Name: "etc/kubernetes/manifests", Mode: 0o755, Dir: true},
		{Name: sys + "kubelet.service.d/10-kubeadm.conf", Mode: 0o644, Data: read("systemd/10-kubeadm.conf")},
		{Name: sys + "kubelet.slice", Mode: 0o644, Data: read("systemd/kubelet.slice")},
	}
	for _, u := range []string{"containerd", "kind-images", "kind-cni", "kubelet", "undo-mount-hacks"} {
		es = append(es,
			entry{Name: sys + u + ".service", Mode: 0o644, Data: read("systemd/" + u + ".service")},
			entry{Name: sys + "multi-user.target.wants/" + u + ".service", Link: "/" + sys + u + ".service"})
	}
	for _, p := range []string{"kubeadm", "kubelet", "kubectl"} {
		es = append(es, entry{Name: "usr/bin/" + p, Mode: 0o755, From: filepath.Join(bin, p)})
	}
	// Every embedded file is used: a new one must be placed above.
	used := map[string]bool{}
	for _, e := range es {
		used[string(e.Data)] = true
	}
	err := fs.WalkDir(files, "files", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if data, _ := files.ReadFile(p); !used[string(data)] {
			return fmt.Errorf("kindnode: %s is embedded but not in the node layer", p)
		}
		return nil
	})
	return es, err
}

// entriesKey sums what the entries hold but files on disk (their own
// paths, which are keyed, stand for them).
func entriesKey(es []entry) string {
	h := sha256.New()
	for _, e := range es {
		fmt.Fprintf(h, "%s %o %s %s %v %d\n", e.Name, e.Mode, e.From, e.Link, e.Dir, len(e.Data))
		h.Write(e.Data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// formatVersion changes whenever how a cached part is written changes, so
// that no cache holds a part written the old way.
const formatVersion = "2"

// keyOf is a short digest of its parts (cache file names).
func keyOf(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return hex.EncodeToString(sum[:])[:16]
}

// fileDigest is a file's sha256, remembered beside it (<file>.sha256).
func fileDigest(path string) (v1.Hash, error) {
	if b, err := os.ReadFile(path + ".sha256"); err == nil {
		return v1.NewHash(strings.TrimSpace(string(b)))
	}
	f, err := os.Open(path)
	if err != nil {
		return v1.Hash{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, bufio.NewReaderSize(f, 1<<20)); err != nil {
		return v1.Hash{}, err
	}
	d := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
	return d, os.WriteFile(path+".sha256", []byte(d.String()), 0o644)
}

// writeFile writes path through fill, atomically.
func writeFile(path string, fill func(io.Writer) error) error {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := fill(bw); err != nil {
		f.Close()
		os.Remove(path + ".tmp")
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// writeDockerArchive writes docker's image archive: the config, each
// layer uncompressed, and manifest.json naming img.Ref.
func writeDockerArchive(w io.Writer, img Image, config []byte, layers []string, diffIDs []v1.Hash) error {
	tw := tar.NewWriter(w)
	add := func(name string, size int64, r io.Reader) error { return addFile(tw, name, size, r) }
	cfgName := strings.TrimPrefix(img.ID, "sha256:") + ".json"
	if err := add(cfgName, int64(len(config)), strings.NewReader(string(config))); err != nil {
		return err
	}
	var names []string
	for i, l := range layers {
		f, err := os.Open(l)
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		n := diffIDs[i].Hex + ".tar"
		err = add(n, st.Size(), f)
		f.Close()
		if err != nil {
			return fmt.Errorf("writing layer %s: %w", l, err)
		}
		names = append(names, n)
	}
	manifest, err := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{img.Ref}, "Layers": names}})
	if err != nil {
		return err
	}
	if err := add("manifest.json", int64(len(manifest)), strings.NewReader(string(manifest))); err != nil {
		return err
	}
	return tw.Close()
}

// defaults fills the options' blanks.
func (o Options) defaults() (Options, error) {
	if o.Root == "" {
		return o, fmt.Errorf("kindnode: Options.Root is required")
	}
	if o.Cache == "" {
		o.Cache = filepath.Join(o.Root, ".cache", "kind")
	}
	if o.KubernetesVersion == "" {
		v, err := pinnedVersion(filepath.Join(o.Root, "hack", "tools", "versions.env"), "KUBERNETES_VERSION")
		if err != nil {
			return o, err
		}
		o.KubernetesVersion = v
	}
	if o.Epoch.IsZero() {
		o.Epoch = DefaultEpoch
	}
	return o, nil
}

// DefaultEpoch is the day of the Debian snapshot the machines' apt
// sources name (2025-05-20).
var DefaultEpoch = time.Date(2025, 5, 20, 0, 0, 0, 0, time.UTC)

// pinnedVersion reads KEY=value from versions.env.
func pinnedVersion(file, key string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s: no %s", file, key)
}

// prune removes what an earlier build left in the cache and this one does
// not use (a node layer is a gigabyte): files and folders of the names
// Build makes, but keep and their .sha256 files.
func prune(o Options, keep ...string) {
	kept := map[string]bool{}
	for _, k := range keep {
		kept[filepath.Base(k)] = true
		kept[filepath.Base(k)+".sha256"] = true
	}
	entries, err := os.ReadDir(o.Cache)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		ours := false
		for _, prefix := range []string{"node-rootfs-", "image-rootfs-", "bin-", "images-", "node-layer-"} {
			ours = ours || strings.HasPrefix(n, prefix)
		}
		if ours && !kept[n] && !strings.Contains(n, ".tmp") {
			o.logf("removing %s from the cache (an earlier build's)", n)
			os.RemoveAll(filepath.Join(o.Cache, n))
		}
	}
}

// addFile writes one regular file of an archive: mode 0644, no time, no
// owner, so that equal content gives equal bytes.
func addFile(tw *tar.Writer, name string, size int64, r io.Reader) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := io.Copy(tw, r)
	return err
}
