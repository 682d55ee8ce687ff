package kindnode

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// controlPlaneImage is one image kubeadm runs, with the program it holds
// (in /usr/local/bin, which kubeadm's manifests call by name).
type controlPlaneImage struct {
	Ref, Program string
}

// controlPlaneImages are the references `kubeadm config images list`
// prints for the pinned release, less CoreDNS (see docs/testing.md: the
// tests need no cluster DNS, and the kind configuration skips the addon).
func controlPlaneImages(k8s string) []controlPlaneImage {
	r := "registry.k8s.io/"
	return []controlPlaneImage{
		{r + "kube-apiserver:" + k8s, "kube-apiserver"},
		{r + "kube-controller-manager:" + k8s, "kube-controller-manager"},
		{r + "kube-scheduler:" + k8s, "kube-scheduler"},
		{r + "kube-proxy:" + k8s, "kube-proxy"},
		{r + "etcd:" + EtcdTag, "etcd"},
		{r + "pause:" + PauseTag, "pause"},
	}
}

// The tags kubeadm v1.36 names for etcd and pause.
const (
	EtcdTag  = "3.6.8-0"
	PauseTag = "3.10.2"
)

// writeImages writes the control-plane images into one docker-archive at
// out (the base layer once): each is the image rootfs plus its program;
// pause is its program alone.
func writeImages(out, base, bin string, o Options) error {
	baseLayer, err := tarball.LayerFromFile(base, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return err
	}
	var refs []refImage
	for _, ci := range controlPlaneImages(o.KubernetesVersion) {
		var buf bytes.Buffer
		target := "usr/local/bin/" + ci.Program
		if ci.Program == "pause" {
			target = "pause"
		}
		if err := writeLayer(&buf, []entry{{Name: target, Mode: 0o755, From: filepath.Join(bin, ci.Program)}}, o.Epoch); err != nil {
			return err
		}
		data := buf.Bytes()
		prog, err := tarball.LayerFromOpener(opener(data), tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return err
		}
		layers := []v1.Layer{baseLayer, prog}
		cfg := v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}
		if ci.Program == "pause" {
			layers, cfg = []v1.Layer{prog}, v1.Config{Entrypoint: []string{"/pause"}}
		}
		img, err := newImage(layers, cfg, o)
		if err != nil {
			return err
		}
		refs = append(refs, refImage{ci.Ref, img})
	}
	return writeFile(out, func(w io.Writer) error { return writeImagesArchive(w, refs) })
}

// refImage is an image and the reference it is imported as.
type refImage struct {
	Ref string
	Img v1.Image
}

// writeImagesArchive writes images as one docker-archive, in their order,
// each layer once (gzip, as go-containerregistry compresses it): equal
// images give equal bytes. (tarball.MultiRefWrite takes a map, whose order
// Go varies from run to run.)
func writeImagesArchive(w io.Writer, images []refImage) error {
	tw := tar.NewWriter(w)
	add := func(name string, size int64, r io.Reader) error { return addFile(tw, name, size, r) }
	type entry struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	var manifest []entry
	seen := map[string]bool{}
	for _, ri := range images {
		raw, err := ri.Img.RawConfigFile()
		if err != nil {
			return err
		}
		cfg, err := ri.Img.ConfigName()
		if err != nil {
			return err
		}
		e := entry{Config: cfg.Hex + ".json", RepoTags: []string{ri.Ref}}
		if err := add(e.Config, int64(len(raw)), bytes.NewReader(raw)); err != nil {
			return err
		}
		layers, err := ri.Img.Layers()
		if err != nil {
			return err
		}
		for _, l := range layers {
			d, err := l.Digest()
			if err != nil {
				return err
			}
			name := d.Hex + ".tar.gz"
			e.Layers = append(e.Layers, name)
			if seen[name] {
				continue
			}
			seen[name] = true
			size, err := l.Size()
			if err != nil {
				return err
			}
			rc, err := l.Compressed()
			if err != nil {
				return err
			}
			err = add(name, size, rc)
			rc.Close()
			if err != nil {
				return fmt.Errorf("%s: layer %s: %w", ri.Ref, d, err)
			}
		}
		manifest = append(manifest, e)
	}
	raw, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	if err := add("manifest.json", int64(len(raw)), bytes.NewReader(raw)); err != nil {
		return err
	}
	return tw.Close()
}

// newImage is an image of layers with config cfg, every time stamped with
// o.Epoch.
func newImage(layers []v1.Layer, cfg v1.Config, o Options) (v1.Image, error) {
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		adds[i] = mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: o.Epoch}, CreatedBy: "tether: make kind-image"}}
	}
	img, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		return nil, err
	}
	file, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	file = file.DeepCopy()
	file.OS, file.Architecture, file.Created, file.Config = "linux", runtime.GOARCH, v1.Time{Time: o.Epoch}, cfg
	return mutate.ConfigFile(img, file)
}

// opener serves data as a layer's uncompressed content.
func opener(data []byte) tarball.Opener {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
}
