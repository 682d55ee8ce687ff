package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spdx/tools-golang/spdx"
)

// fakeInfo is a binary's build info as debug/buildinfo reads it.
func fakeInfo() *debug.BuildInfo {
	return &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Path:      MainModule + "/cmd/binder",
		Main:      debug.Module{Path: MainModule, Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "k8s.io/client-go", Version: "v0.36.3", Sum: "h1:" + strings.Repeat("A", 43) + "="},
			{Path: "example.com/old", Version: "v1.0.0", Replace: &debug.Module{Path: "example.com/new", Version: "v1.1.0", Sum: "h1:" + strings.Repeat("B", 43) + "="}},
		},
		Settings: []debug.BuildSetting{{Key: "-trimpath", Value: "true"}, {Key: "CGO_ENABLED", Value: "0"}, {Key: "GOARCH", Value: "amd64"}},
	}
}

func fakeSBOMSpec() SBOMSpec {
	return SBOMSpec{Component: "binder", Ref: "ghcr.io/tether-csi/binder:v0.1.0", Digest: "sha256:" + strings.Repeat("c", 64),
		Version: "v0.1.0", Revision: strings.Repeat("1", 40), Created: created,
		Binaries: []SBOMBinary{{Platform: "linux/amd64", SHA256: strings.Repeat("d", 64), Info: fakeInfo()}}}
}

func packageNamed(doc *spdx.Document, name string) *spdx.Package {
	for _, p := range doc.Packages {
		if p.PackageName == name {
			return p
		}
	}
	return nil
}

func TestSBOMIsValidAndReproducible(t *testing.T) {
	a, err := SBOM(fakeSBOMSpec())
	if err != nil {
		t.Fatal(err)
	}
	b, err := SBOM(fakeSBOMSpec())
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("the same spec twice: equal %v, %v", bytes.Equal(a, b), err)
	}
	later := fakeSBOMSpec()
	later.Created = created.Add(time.Second)
	c, err := SBOM(later)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ValidateSBOM(a)
	if err != nil {
		t.Fatal(err)
	}
	docC, err := ValidateSBOM(c)
	if err != nil {
		t.Fatal(err)
	}
	if doc.DocumentNamespace == docC.DocumentNamespace {
		t.Errorf("another creation time, the same namespace %s", doc.DocumentNamespace)
	}
	if doc.CreationInfo.Created != "2026-11-24T12:00:00Z" {
		t.Errorf("created %s, want the spec's time", doc.CreationInfo.Created)
	}
	for _, tc := range []struct{ name, version, ref string }{
		{MainModule, "v0.1.0", "pkg:golang/" + MainModule + "@v0.1.0"},
		{"k8s.io/client-go", "v0.36.3", "h1:" + strings.Repeat("A", 43) + "="},
		{"example.com/new", "v1.1.0", "h1:" + strings.Repeat("B", 43) + "="},
		{"go", "go1.26.8", "pkg:golang/stdlib@1.26.8"},
		{"binder", "v0.1.0", ""},
		{"ghcr.io/tether-csi/binder", "v0.1.0", "pkg:oci/binder@sha256%3A" + strings.Repeat("c", 64)},
	} {
		p := packageNamed(doc, tc.name)
		if p == nil || p.PackageVersion != tc.version {
			t.Errorf("package %s: %+v, want version %s", tc.name, p, tc.version)
			continue
		}
		found := tc.ref == ""
		for _, r := range p.PackageExternalReferences {
			found = found || strings.HasPrefix(r.Locator, tc.ref)
		}
		if !found {
			t.Errorf("package %s: no reference %s", tc.name, tc.ref)
		}
	}
	if p := packageNamed(doc, "binder"); p == nil || len(p.PackageChecksums) != 1 || p.PackageChecksums[0].Value != strings.Repeat("d", 64) {
		t.Errorf("the binary's checksum: %+v", p)
	}
}

func TestSBOMRefuses(t *testing.T) {
	for name, edit := range map[string]func(*SBOMSpec){
		"no binaries":       func(s *SBOMSpec) { s.Binaries = nil },
		"no build info":     func(s *SBOMSpec) { s.Binaries[0].Info = nil },
		"another module":    func(s *SBOMSpec) { s.Binaries[0].Info.Main.Path = "example.com/x" },
		"short sha256":      func(s *SBOMSpec) { s.Binaries[0].SHA256 = "abc" },
		"no tag":            func(s *SBOMSpec) { s.Ref = "ghcr.io/tether-csi/binder" },
		"digest not sha256": func(s *SBOMSpec) { s.Digest = "md5:abc" },
	} {
		s := fakeSBOMSpec()
		edit(&s)
		if _, err := SBOM(s); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestValidateSBOMRefuses(t *testing.T) {
	good, err := SBOM(fakeSBOMSpec())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, old, new string
		all            bool // replace every occurrence, not the first
	}{
		{"SPDX 2.2", `"spdxVersion": "SPDX-2.3"`, `"spdxVersion": "SPDX-2.2"`, false},
		{"data license", `"dataLicense": "CC0-1.0"`, `"dataLicense": "MIT"`, false},
		{"namespace with a fragment", `"documentNamespace": "https://`, `"documentNamespace": "https://x#`, false},
		{"relative namespace", `"documentNamespace": "https://`, `"documentNamespace": "`, false},
		{"created", `"created": "2026-11-24T12:00:00Z"`, `"created": "2026-11-24"`, false},
		{"an unknown element", `"relatedSpdxElement": "SPDXRef-Image"`, `"relatedSpdxElement": "SPDXRef-Nothing"`, false},
		{"a duplicate ID", `"SPDXRef-MainModule"`, `"SPDXRef-Image"`, true},
		{"a malformed ID", `"SPDXRef-MainModule"`, `"SPDXRef-Main_Module"`, true},
		{"a short checksum", `"checksumValue": "dddd`, `"checksumValue": "dd`, false},
		{"files analyzed", `"filesAnalyzed": false`, `"filesAnalyzed": true`, false},
		{"describes nothing", `"relationshipType": "DESCRIBES"`, `"relationshipType": "CONTAINS"`, false},
		{"not JSON", `{`, `[`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 1
			if tc.all {
				n = -1
			}
			bad := strings.Replace(string(good), tc.old, tc.new, n)
			if bad == string(good) {
				t.Fatalf("%q is not in the document", tc.old)
			}
			_, err := ValidateSBOM([]byte(bad))
			if err == nil {
				t.Fatal("valid")
			}
			t.Log(err)
		})
	}
}

func goListVersion(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", module).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestReleaseSupplyChainFiles builds the binder's image for this machine
// as make release does, then SHA256SUMS and the provenance: the SBOM
// BuildImages wrote from the real binary validates, names the main module
// at the release version, k8s.io/client-go at go.mod's version and the
// toolchain go env names, and VerifyRelease finds everything in order
// (the SBOM's binary is the archive's /app; the provenance's subjects are
// SHA256SUMS's). A changed SBOM or SHA256SUMS fails it.
func TestReleaseSupplyChainFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("images are linux")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const version = "v0.1.0-test.1"
	built, err := BuildImages(t.Context(), BuildOptions{Root: root, Version: version, Registry: "ghcr.io/tether-csi",
		Platforms: []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}}, Components: Components[:1], Out: dir})
	if err != nil {
		t.Fatal(err)
	}
	sbomFile := filepath.Join(dir, SBOMName("binder", version))
	data, err := os.ReadFile(sbomFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ValidateSBOM(data)
	if err != nil {
		t.Fatal(err)
	}
	gover, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		MainModule:                  version,
		"k8s.io/client-go":          goListVersion(t, "k8s.io/client-go"),
		"k8s.io/apimachinery":       goListVersion(t, "k8s.io/apimachinery"),
		"go":                        strings.TrimSpace(string(gover)),
		"ghcr.io/tether-csi/binder": version,
	} {
		if p := packageNamed(doc, name); p == nil || p.PackageVersion != want {
			t.Errorf("package %s: %+v, want version %s", name, p, want)
		}
	}
	if err := WriteSums(dir); err != nil {
		t.Fatal(err)
	}
	if err := WriteProvenance(t.Context(), root, dir, ProvenanceSpec{Version: version, Registry: "ghcr.io/tether-csi",
		Platforms: []string{"linux/" + runtime.GOARCH}}); err != nil {
		t.Fatal(err)
	}
	v, err := VerifyRelease(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v.Files != 3 || len(v.SBOMs) != 1 || v.Binaries != 1 || len(built) != 1 {
		t.Errorf("verified %+v, want 3 files (archive, SBOM, images.json), 1 SBOM, 1 binary", v)
	}
	// A file SHA256SUMS lists that the provenance does not name.
	if err := os.WriteFile(filepath.Join(dir, "extra.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSums(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyRelease(dir); err == nil || !strings.Contains(err.Error(), "extra.txt: sha256") {
		t.Errorf("a file the provenance does not name: %v", err)
	}
	// An SBOM naming another binary (SHA256SUMS rewritten to match): the
	// archive's /app is not the one it names.
	bin := packageNamed(doc, "binder").PackageChecksums[0].Value
	if err := os.WriteFile(sbomFile, bytes.Replace(data, []byte(bin), []byte(strings.Repeat("0", 64)), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSums(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyRelease(dir); err == nil || !strings.Contains(err.Error(), "/app sha256") {
		t.Errorf("an SBOM naming another binary: %v", err)
	}
}
