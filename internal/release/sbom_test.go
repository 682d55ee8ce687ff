package release

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
	"time"

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
