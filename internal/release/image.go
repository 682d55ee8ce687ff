package release

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Component is one of tether's images: a main package of this module.
type Component struct {
	// Name names the image (ghcr.io/tether-csi/<Name>) and its archives.
	Name string
	// Package is the main package, relative to the module root.
	Package string
}

// Components are the images `make images` builds. The local driver's
// DaemonSet runs it as root (it mounts); the image's own user is the same
// non-root user as the others', so nothing runs as root unless asked.
var Components = []Component{
	{Name: "binder", Package: "./cmd/binder"},
	{Name: "provisioner", Package: "./cmd/provisioner"},
	{Name: "local-driver", Package: "./examples/local-driver"},
}

// Platforms are the platforms a release is built for.
var Platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// NonRoot is the images' user, distroless nonroot's uid and gid.
const NonRoot = "65532:65532"

// ImageSpec is what goes into one image.
type ImageSpec struct {
	// Binary is the static program, run as /app.
	Binary []byte
	// Platform is the binary's platform.
	Platform v1.Platform
	// Version labels the image (org.opencontainers.image.version).
	Version string
	// Revision is the source commit (org.opencontainers.image.revision).
	Revision string
	// Created stamps the config and the layer's files: the commit's time,
	// so that a rebuild from the same commit gives the same digest.
	Created time.Time
}

// NewImage builds the image: one layer with /app, /etc/passwd and
// /etc/group (the non-root user's name for tools that look it up) and a
// writable /tmp; no shell, no package manager, nothing else.
func NewImage(s ImageSpec) (v1.Image, error) {
	layerTar, err := rootFS(s.Binary, s.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "tether: make images", Comment: "static binary /app"},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = s.Platform.OS, s.Platform.Architecture, s.Platform.Variant
	cfg.Created = v1.Time{Time: s.Created}
	cfg.Config = v1.Config{
		Entrypoint: []string{"/app"},
		User:       NonRoot,
		WorkingDir: "/",
		Env:        []string{"PATH=/"},
		Labels: map[string]string{
			"org.opencontainers.image.source":   "https://github.com/tether-csi/tether",
			"org.opencontainers.image.version":  s.Version,
			"org.opencontainers.image.revision": s.Revision,
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
	}
	return mutate.ConfigFile(img, cfg)
}

// rootFS is the layer's tar: sorted, owned by root, every time the
// commit's, so equal inputs give equal bytes.
func rootFS(binary []byte, created time.Time) ([]byte, error) {
	files := []struct {
		name string
		mode int64
		data []byte
		dir  bool
	}{
		{name: "app", mode: 0o755, data: binary},
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: created.UTC(), Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if f.name == "home/nonroot/" {
			h.Uid, h.Gid = 65532, 65532
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer %s: %w", path.Clean(f.name), err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// NewIndex is the multi-platform index of one component's images: what a
// registry serves under the component's tag, and the digest tether.yaml
// pins.
func NewIndex(images []v1.Image) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, img := range images {
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		p := cfg.Platform()
		if p == nil {
			return nil, fmt.Errorf("image without a platform")
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	return mutate.AppendManifests(idx, adds...), nil
}
