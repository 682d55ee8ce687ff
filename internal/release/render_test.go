package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeBuilt names every component with a made-up index digest, as
// images.json would.
func fakeBuilt(registry, tag string) []Built {
	var built []Built
	for i, c := range Components {
		built = append(built, Built{Component: c.Name, Ref: registry + "/" + c.Name + ":" + tag,
			Digest: "sha256:" + strings.Repeat(string(rune('a'+i)), 64)})
	}
	return built
}

// TestRenderPinsDeployCSI renders each of the repository's bundles
// (deploy/csi and deploy/production) in-process (no kubectl): every one of
// tether's images it names is named by tag and index digest, deploy/csi
// names all three, deploy/production the binder's only and no part of the
// example driver, and nothing else moved. With kubectl in the tools cache
// (TETHER_TOOLS_BIN, as make sets it), the bytes are also `kubectl
// kustomize`'s of the same overlay.
func TestRenderPinsDeployCSI(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	built := fakeBuilt("registry.example.com/tether", "v0.1.0")
	for _, tt := range []struct {
		bundle Bundle
		names  []string // the components whose image it names
		absent []string // what it must not hold
	}{
		{Bundles[0], []string{"binder", "provisioner", "local-driver"}, nil},
		{Bundles[1], []string{"binder"}, []string{"kind: DaemonSet", "kind: StorageClass", "kind: CSIDriver", "local-driver", "privileged"}},
	} {
		t.Run(tt.bundle.File, func(t *testing.T) {
			out, err := Render(root, tt.bundle.Dir, built)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range built {
				want := slices.Contains(tt.names, b.Component)
				if got := bytes.Contains(out, []byte("image: "+b.Ref+"@"+b.Digest+"\n")); got != want {
					t.Errorf("%s names %s@%s: %v, want %v", tt.bundle.File, b.Ref, b.Digest, got, want)
				}
			}
			for _, s := range tt.absent {
				if bytes.Contains(out, []byte(s)) {
					t.Errorf("%s holds %q", tt.bundle.File, s)
				}
			}
			if bytes.Contains(out, []byte("ghcr.io/tether-csi/")) {
				t.Errorf("%s still names ghcr.io/tether-csi/", tt.bundle.File)
			}
			compareKubectl(t, root, tt.bundle.Dir, built, out)
		})
	}
}

// compareKubectl checks that out is `kubectl kustomize`'s render of the
// same overlay over dir, when TETHER_TOOLS_BIN holds kubectl.
func compareKubectl(t *testing.T, root, dir string, built []Built, out []byte) {
	t.Helper()
	kubectl := filepath.Join(os.Getenv("TETHER_TOOLS_BIN"), "kubectl")
	if _, err := os.Stat(kubectl); os.Getenv("TETHER_TOOLS_BIN") == "" || err != nil {
		t.Logf("no kubectl in TETHER_TOOLS_BIN: not compared with kubectl kustomize")
		return
	}
	tmp := t.TempDir()
	if err := os.CopyFS(filepath.Join(tmp, "deploy"), os.DirFS(filepath.Join(root, "deploy"))); err != nil {
		t.Fatal(err)
	}
	k, err := Overlay("../"+dir, built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(tmp, "release"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "release", "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := exec.CommandContext(t.Context(), kubectl, "kustomize", filepath.Join(tmp, "release")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("in-process render of %s (%d bytes) differs from kubectl kustomize (%d bytes)", dir, len(out), len(want))
	}
}
