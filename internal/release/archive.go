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

// WriteArchive writes a component's multi-platform index idx, with every
// platform's manifest, config and layers, as an OCI image layout in one tar
// file. Its index.json names the index twice, so that `ctr -n k8s.io images
// import` records two containerd images with the index as target:
//
//   - ref, <repo>:<tag> (also the OCI ref.name <tag>): what `ctr images
//     ls` shows;
//   - <repo>@<index digest>: the name containerd's CRI resolves a pod's
//     image <repo>:<tag>@<index digest> to (it drops the tag of a
//     reference with a digest and looks the rest up by name), so
//     tether.yaml's pins run from an imported archive without a pull.
//
// Every platform's layers are in it because `kind load image-archive`
// imports with --all-platforms, and containerd 2 then unpacks every
// platform (containerd 1.6 reads every platform's manifest). The tar is
// sorted with fixed times, so equal inputs give equal files.
func WriteArchive(file, ref string, idx v1.ImageIndex) error {
	repo, tag, ok := splitTag(ref)
	if !ok {
		return fmt.Errorf("%s: want <repo>:<tag>", ref)
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Dir(file), ".oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	for _, names := range []map[string]string{
		{annotationContainerName: ref, annotationRefName: tag},
		{annotationContainerName: repo + "@" + d.String()},
	} {
		if err := p.AppendIndex(idx, layout.WithAnnotations(names)); err != nil {
			return err
		}
	}
	return tarDir(dir, file)
}

// splitTag splits <repo>:<tag> (a registry's port is no tag).
func splitTag(ref string) (repo, tag string, ok bool) {
	i := strings.LastIndex(ref, ":")
	if i <= strings.LastIndex(ref, "/") || strings.Contains(ref, "@") {
		return ref, "", false
	}
	return ref[:i], ref[i+1:], true
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

// Archived is what ReadArchive found in an archive.
type Archived struct {
	// Ref is the name the archive gives its index (<repo>:<tag>).
	Ref string
	// Index is the component's index with every platform's image.
	Index v1.ImageIndex
}

// ReadArchive reads an archive WriteArchive wrote, into dir, which must
// outlive the use of what it returns. It refuses an archive whose names do
// not match its index, or that lacks a blob of one of its platforms.
func ReadArchive(file, dir string) (Archived, error) {
	if err := untar(file, dir); err != nil {
		return Archived{}, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return Archived{}, fmt.Errorf("%s: %w", file, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return Archived{}, fmt.Errorf("%s: %w", file, err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return Archived{}, fmt.Errorf("%s: %w", file, err)
	}
	var named []string
	for _, d := range tm.Manifests {
		if !d.MediaType.IsIndex() || d.Digest != tm.Manifests[0].Digest {
			return Archived{}, fmt.Errorf("%s: index.json names %s %s, want one index", file, d.MediaType, d.Digest)
		}
		named = append(named, d.Annotations[annotationContainerName])
	}
	if len(named) == 0 {
		return Archived{}, fmt.Errorf("%s: index.json names nothing", file)
	}
	repo, _, ok := splitTag(named[0])
	if want := repo + "@" + tm.Manifests[0].Digest.String(); !ok || len(named) != 2 || named[1] != want {
		return Archived{}, fmt.Errorf("%s: names %q, want <repo>:<tag> and %s", file, named, want)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return Archived{}, fmt.Errorf("%s: %w", file, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return Archived{}, fmt.Errorf("%s: %w", file, err)
	}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return Archived{}, fmt.Errorf("%s: platform manifest %s: %w", file, d.Digest, err)
		}
		if err := hasBlobs(p, img); err != nil {
			return Archived{}, fmt.Errorf("%s: %s: %w", file, d.Digest, err)
		}
	}
	return Archived{Ref: named[0], Index: idx}, nil
}

// hasBlobs fails unless the layout holds img's config and every layer.
func hasBlobs(p layout.Path, img v1.Image) error {
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if _, err := os.Stat(filepath.Join(string(p), "blobs", d.Digest.Algorithm, d.Digest.Hex)); err != nil {
			return fmt.Errorf("blob %s: %w", d.Digest, err)
		}
	}
	return nil
}

// untar unpacks file into dir, refusing entries that leave it.
func untar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("%s: entry %q leaves the archive", file, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			out, err := os.Create(name)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			out.Close()
			if err != nil {
				return err
			}
		}
	}
}
