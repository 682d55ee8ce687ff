package release

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Annotations containerd's `ctr images import` reads for an image's name.
const (
	annotationRefName       = "org.opencontainers.image.ref.name"
	annotationContainerName = "io.containerd.image.name"
)

// WriteArchive writes img as an OCI image layout in one tar file, named
// ref: `ctr -n k8s.io images import` loads it under that name, and `crane
// push`, skopeo (oci-archive:) and Push read it. The tar is sorted with
// fixed times, so equal images give equal files.
func WriteArchive(file, ref string, img v1.Image) error {
	dir, err := os.MkdirTemp(filepath.Dir(file), ".oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	tag := ref
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{annotationRefName: tag, annotationContainerName: ref})); err != nil {
		return err
	}
	return tarDir(dir, file)
}

// tarDir writes dir's files into file, sorted, owned by root, dated 0.
func tarDir(dir, file string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	tmp := file + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, p := range names {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: time.Unix(0, 0).UTC(), Format: tar.FormatPAX}
		if st.IsDir() {
			h.Name, h.Typeflag, h.Mode = h.Name+"/", tar.TypeDir, 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		h.Typeflag, h.Size = tar.TypeReg, st.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		src.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// ReadArchive reads an archive WriteArchive wrote: its one image and the
// name it carries. The image reads from dir, which must outlive its use.
func ReadArchive(file, dir string) (v1.Image, string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", file, err)
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, filepath.Clean(dir)+string(os.PathSeparator)) {
			return nil, "", fmt.Errorf("%s: entry %q leaves the archive", file, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(name, 0o755); err != nil {
				return nil, "", err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return nil, "", err
			}
			out, err := os.Create(name)
			if err != nil {
				return nil, "", err
			}
			_, err = io.Copy(out, tr)
			out.Close()
			if err != nil {
				return nil, "", err
			}
		}
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", file, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, "", err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, "", err
	}
	if len(m.Manifests) != 1 {
		return nil, "", fmt.Errorf("%s: %d manifests, want 1 image", file, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return nil, "", err
	}
	return img, m.Manifests[0].Annotations[annotationContainerName], nil
}
