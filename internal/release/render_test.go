package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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

// TestRenderPinsDeployCSI renders the repository's deploy/csi in-process
// (no kubectl): every one of tether's images is named by tag and index
// digest, and nothing else moved. With kubectl in the tools cache
// (TETHER_TOOLS_BIN, as make sets it), the bytes are also `kubectl
// kustomize`'s of the same overlay.
func TestRenderPinsDeployCSI(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	built := fakeBuilt("registry.example.com/tether", "v0.1.0")
	out, err := Render(root, built)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range built {
		if !bytes.Contains(out, []byte("image: "+b.Ref+"@"+b.Digest+"\n")) {
			t.Errorf("tether.yaml does not name %s@%s", b.Ref, b.Digest)
		}
	}
	if bytes.Contains(out, []byte("ghcr.io/tether-csi/")) {
		t.Error("tether.yaml still names ghcr.io/tether-csi/")
	}

	kubectl := filepath.Join(os.Getenv("TETHER_TOOLS_BIN"), "kubectl")
	if _, err := os.Stat(kubectl); os.Getenv("TETHER_TOOLS_BIN") == "" || err != nil {
		t.Logf("no kubectl in TETHER_TOOLS_BIN: not compared with kubectl kustomize")
		return
	}
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "deploy"), os.DirFS(filepath.Join(root, "deploy"))); err != nil {
		t.Fatal(err)
	}
	k, err := Overlay("../deploy/csi", built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "release"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "release", "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := exec.CommandContext(t.Context(), kubectl, "kustomize", filepath.Join(dir, "release")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("in-process render (%d bytes) differs from kubectl kustomize (%d bytes)", len(out), len(want))
	}
}
