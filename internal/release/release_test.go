package release

import (
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

var created = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func testImage(t *testing.T, binary string, p v1.Platform) v1.Image {
	t.Helper()
	img, err := NewImage(ImageSpec{Binary: []byte(binary), Platform: p, Version: "v0.1.0", Revision: "abc", Created: created})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func digest(t *testing.T, d interface{ Digest() (v1.Hash, error) }) string {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

func TestImageIsReproducibleAndNonRoot(t *testing.T) {
	amd := v1.Platform{OS: "linux", Architecture: "amd64"}
	a, b := testImage(t, "binary", amd), testImage(t, "binary", amd)
	if digest(t, a) != digest(t, b) {
		t.Fatalf("same inputs, digests %s and %s", digest(t, a), digest(t, b))
	}
	for what, other := range map[string]v1.Image{
		"another binary":   testImage(t, "binary2", amd),
		"another platform": testImage(t, "binary", v1.Platform{OS: "linux", Architecture: "arm64"}),
	} {
		if digest(t, other) == digest(t, a) {
			t.Errorf("%s: same digest", what)
		}
	}
	cfg, err := a.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != NonRoot || strings.Join(cfg.Config.Entrypoint, " ") != "/app" || cfg.Architecture != "amd64" {
		t.Errorf("config: user %q entrypoint %q arch %q", cfg.Config.User, cfg.Config.Entrypoint, cfg.Architecture)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != "v0.1.0" {
		t.Errorf("labels %v", cfg.Config.Labels)
	}
	layers, err := a.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
}

func TestCheckPinned(t *testing.T) {
	d := "@sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct {
		name, yaml string
		ok         bool
	}{
		{"pinned", "        image: ghcr.io/tether-csi/binder:v0.1.0" + d + "\n        image: registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.13.0\n", true},
		{"latest", "        image: ghcr.io/tether-csi/binder:latest\n", false},
		{"other latest", "      - image: example.com/x:latest\n", false},
		{"no tag", "        image: busybox\n", false},
		{"ours without digest", "        image: ghcr.io/tether-csi/provisioner:v0.1.0\n", false},
		{"port is no tag", "        image: localhost:5000/x\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckPinned([]byte(tc.yaml)); (err == nil) != tc.ok {
				t.Errorf("CheckPinned: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestNotes(t *testing.T) {
	log := "# Changelog\n\nintro\n\n## Unreleased (v0.2.0)\n- next\n\n## v0.1.0 - 2026-11-24\n- first\n"
	for _, tc := range []struct{ version, want string }{
		{"v0.1.0", "- first"},
		{"v0.2.0-rc.1", "- next"},
		{"v0.2.0", "- next"},
	} {
		got, err := Notes([]byte(log), tc.version)
		if err != nil || !strings.Contains(got, tc.want) || !strings.HasPrefix(got, "# tether "+tc.version) {
			t.Errorf("Notes(%s) = %q, %v; want %q", tc.version, got, err, tc.want)
		}
	}
	if _, err := Notes([]byte(log), "v0.3.0"); err == nil {
		t.Error("a version with no section: want an error")
	}
}

func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{"v0.1.0": true, "v0.1.0-rc.1": true, "v1.2.3": true, "0.1.0": false, "v0.1": false, "v01.1.0": false, "latest": false} {
		if err := CheckVersion(v); (err == nil) != ok {
			t.Errorf("CheckVersion(%q) = %v, want ok=%v", v, err, ok)
		}
	}
}
