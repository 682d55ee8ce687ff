package main

import (
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/tether-csi/tether/internal/release"
)

// TestPushFromTheBundleFolder builds tether-push as make release does and
// runs it in a bundle folder (archive, images.json, tether.yaml: no
// go.mod, and no go on PATH) with no -dir, as the README says: the
// registry serves the pinned digest, and tether-<registry>.yaml names it.
func TestPushFromTheBundleFolder(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	host := v1.Platform{OS: "linux", Architecture: "amd64"}
	bin, err := release.BuildBinary(t.Context(), release.BinaryOptions{Root: root, Package: "./cmd/tether-push", Version: "v0.1.0",
		Platform: v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tether-push"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := release.NewImage(release.ImageSpec{Binary: []byte("app"), Platform: host, Version: "v0.1.0", Created: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := release.NewIndex([]v1.Image{img})
	if err != nil {
		t.Fatal(err)
	}
	b := release.Built{Component: "binder", Ref: "ghcr.io/tether-csi/binder:v0.1.0", File: release.ArchiveName("binder", "v0.1.0"),
		Platforms: map[string]release.PlatformImage{}}
	d, _ := idx.Digest()
	md, _ := img.Digest()
	b.Digest, b.Platforms["linux/amd64"] = d.String(), release.PlatformImage{Digest: md.String()}
	if err := release.WriteArchive(filepath.Join(dir, b.File), b.Ref, idx); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal([]release.Built{b})
	yaml := "spec:\n  containers:\n  - image: " + b.Ref + "@" + b.Digest + "\n"
	for file, content := range map[string][]byte{"images.json": data, "tether.yaml": []byte(yaml)} {
		if err := os.WriteFile(filepath.Join(dir, file), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://") + "/tether"
	cmd := exec.CommandContext(t.Context(), "./tether-push", "-registry", reg)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/nonexistent", "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	t.Logf("tether-push:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(reg + "/binder:v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil || desc.Digest != d {
		t.Fatalf("the registry serves %v (%v), pinned %s", desc, err, d)
	}
	got, err := os.ReadFile(filepath.Join(dir, release.ManifestsFile(reg)))
	if err != nil {
		t.Fatal(err)
	}
	if want := "  - image: " + reg + "/binder:v0.1.0@" + b.Digest + "\n"; !strings.Contains(string(got), want) {
		t.Errorf("%s:\n%s\nwant a line %q", release.ManifestsFile(reg), got, want)
	}
}
