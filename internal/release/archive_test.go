package release

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = v1.Platform{OS: "linux", Architecture: "arm64"}
)

// testBundle writes, into dir, a component's archive for platforms (in
// that order, as BuildImages would) and appends it to dir's images.json.
// The binary is named after the platform and salt, so another salt gives
// other bytes.
func testBundle(t *testing.T, dir, ref, salt string, platforms ...v1.Platform) Built {
	t.Helper()
	repo, tag, _ := splitTag(ref)
	component := repo[strings.LastIndex(repo, "/")+1:]
	b := Built{Component: component, Ref: ref, File: ArchiveName(component, tag), Platforms: map[string]PlatformImage{}}
	var images []v1.Image
	for _, p := range platforms {
		img := testImage(t, "binary-"+p.Architecture+salt, p)
		cfg, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		b.Platforms[p.OS+"/"+p.Architecture] = PlatformImage{Digest: digest(t, img), Config: cfg.String()}
		images = append(images, img)
	}
	idx, err := NewIndex(images)
	if err != nil {
		t.Fatal(err)
	}
	b.Digest = digest(t, idx)
	if err := WriteArchive(filepath.Join(dir, b.File), ref, idx); err != nil {
		t.Fatal(err)
	}
	var all []Built
	if data, err := os.ReadFile(filepath.Join(dir, "images.json")); err == nil {
		if err := json.Unmarshal(data, &all); err != nil {
			t.Fatal(err)
		}
	}
	all = slices.DeleteFunc(all, func(o Built) bool { return o.Component == component })
	data, err := json.Marshal(append(all, b))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "images.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// tarFiles is an archive's files by name.
func tarFiles(t *testing.T, file string) map[string][]byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = data
	}
}

func blobName(d v1.Hash) string { return "blobs/" + d.Algorithm + "/" + d.Hex }

// TestArchiveNamesThePin reads an archive as containerd's importer does
// (index.json, then blobs by digest): it names the index tether.yaml pins
// both as <repo>:<tag> and as <repo>@<index digest>, and holds every
// platform's manifest, config and layers (kind imports with
// --all-platforms, and containerd 2 then unpacks them all).
func TestArchiveNamesThePin(t *testing.T) {
	dir := t.TempDir()
	b := testBundle(t, dir, "registry.example.com:5000/tether/binder:v0.1.0", "", amd64, arm64)
	files := tarFiles(t, filepath.Join(dir, b.File))
	var top v1.IndexManifest
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range top.Manifests {
		if d.Digest.String() != b.Digest || !d.MediaType.IsIndex() {
			t.Errorf("index.json names %s %s, want the index %s", d.MediaType, d.Digest, b.Digest)
		}
		names = append(names, d.Annotations[annotationContainerName])
	}
	want := []string{b.Ref, "registry.example.com:5000/tether/binder@" + b.Digest}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("containerd names %q, want %q", names, want)
	}
	if top.Manifests[0].Annotations[annotationRefName] != "v0.1.0" {
		t.Errorf("OCI ref.name %q", top.Manifests[0].Annotations[annotationRefName])
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(files[blobName(top.Manifests[0].Digest)], &idx); err != nil {
		t.Fatalf("index blob: %v", err)
	}
	if len(idx.Manifests) != 2 {
		t.Fatalf("the index lists %d platforms", len(idx.Manifests))
	}
	for _, d := range idx.Manifests {
		plat := d.Platform.OS + "/" + d.Platform.Architecture
		if d.Digest.String() != b.Platforms[plat].Digest {
			t.Errorf("the index's %s manifest is %s, images.json says %s", plat, d.Digest, b.Platforms[plat].Digest)
		}
		var m v1.Manifest
		if err := json.Unmarshal(files[blobName(d.Digest)], &m); err != nil {
			t.Fatalf("manifest of %s: %v", plat, err)
		}
		for _, blob := range append([]v1.Descriptor{m.Config}, m.Layers...) {
			if _, held := files[blobName(blob.Digest)]; !held {
				t.Errorf("%s's blob %s is not in the archive", plat, blob.Digest)
			}
		}
	}
}

// TestArchiveRoundTrip: the same inputs write the same bytes, and
// ReadArchive finds the name and index written.
func TestArchiveRoundTrip(t *testing.T) {
	dir, again := t.TempDir(), t.TempDir()
	b := testBundle(t, dir, "ghcr.io/tether-csi/binder:v0.1.0", "", amd64, arm64)
	testBundle(t, again, "ghcr.io/tether-csi/binder:v0.1.0", "", amd64, arm64)
	first, err := os.ReadFile(filepath.Join(dir, b.File))
	if err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(filepath.Join(again, b.File)); string(first) != string(second) {
		t.Error("the same images wrote two different archives")
	}
	got, err := ReadArchive(filepath.Join(dir, b.File), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got.Ref != b.Ref || digest(t, got.Index) != b.Digest {
		t.Errorf("read back %s index %s; wrote %s %s", got.Ref, digest(t, got.Index), b.Ref, b.Digest)
	}
	if err := checkArchive(got.Index, b); err != nil {
		t.Error(err)
	}
}
