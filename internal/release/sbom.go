package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
	"github.com/spdx/tools-golang/spdxlib"
)

// Source is tether's repository: the images' org.opencontainers.image.source
// and the SBOMs' and provenance's source.
const Source = "https://github.com/tether-csi/tether"

// MainModule is this module's path, the main module of every binary.
const MainModule = "github.com/tether-csi/tether"

// SBOMName names a component's SBOM beside its archive.
func SBOMName(component, version string) string {
	return fmt.Sprintf("tether-%s_%s.spdx.json", component, version)
}

// SBOMBinary is one platform's binary of an image.
type SBOMBinary struct {
	Platform string // os/arch
	SHA256   string // hex, of the binary's bytes
	Info     *debug.BuildInfo
}

// SBOMSpec is what an image's SBOM says.
type SBOMSpec struct {
	Component string
	// Ref is the image's <repo>:<tag>; Digest its index's digest.
	Ref, Digest string
	// Version is the release version (the main module's version: the
	// binaries are built without VCS stamping, so their build info says
	// "(devel)").
	Version  string
	Revision string
	// Created is the document's creation time (the commit's, or
	// SOURCE_DATE_EPOCH's, as the images').
	Created  time.Time
	Binaries []SBOMBinary
}

// spdxTime is SPDX's date format (UTC, seconds).
const spdxTime = "2006-01-02T15:04:05Z"

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxID makes an SPDX element ID (SPDXRef-<[A-Za-z0-9.-]+>) of parts.
func spdxID(parts ...string) common.ElementID {
	return common.ElementID(spdxIDUnsafe.ReplaceAllString(strings.Join(parts, "-"), "-"))
}

// purl is a package URL (github.com/package-url/purl-spec) of a Go module.
func goPURL(path, version string) string {
	return "pkg:golang/" + path + "@" + url.PathEscape(version)
}

// SBOM is the SPDX 2.3 document of one image: the multi-platform image
// (described by the document), each platform's binary in it (its SHA-256,
// platform and build settings), the main module the binaries are built
// from, the Go toolchain (and standard library) that built them and every
// module linked into them, with its version and go.sum hash, from the
// binaries' own build info (debug/buildinfo). Nothing in it depends on
// when it is made: the creation time is s.Created and the document
// namespace ends in the SHA-256 of the rest of the document.
func SBOM(s SBOMSpec) ([]byte, error) {
	if len(s.Binaries) == 0 {
		return nil, fmt.Errorf("sbom %s: no binaries", s.Component)
	}
	repo, tag, ok := splitTag(s.Ref)
	if !ok || !strings.HasPrefix(s.Digest, "sha256:") {
		return nil, fmt.Errorf("sbom %s: ref %q digest %q", s.Component, s.Ref, s.Digest)
	}
	name := strings.TrimSuffix(SBOMName(s.Component, tag), ".spdx.json")
	noAssertion := "NOASSERTION"
	image := &spdx.Package{
		PackageName:             repo,
		PackageSPDXIdentifier:   "Image",
		PackageVersion:          tag,
		PackageDownloadLocation: noAssertion,
		PrimaryPackagePurpose:   "CONTAINER",
		PackageExternalReferences: []*spdx.PackageExternalReference{{
			Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL,
			Locator: "pkg:oci/" + s.Component + "@" + url.QueryEscape(s.Digest) + "?repository_url=" + url.QueryEscape(repo) + "&tag=" + url.QueryEscape(tag),
		}},
		PackageComment: "The multi-platform image (OCI index " + s.Digest + ") in the archive " + ArchiveName(s.Component, tag) + ".",
	}
	main := &spdx.Package{
		PackageName:             MainModule,
		PackageSPDXIdentifier:   "MainModule",
		PackageVersion:          s.Version,
		PackageDownloadLocation: "git+" + Source + "@" + s.Revision,
		PrimaryPackagePurpose:   "SOURCE",
		PackageLicenseDeclared:  "Apache-2.0",
		PackageExternalReferences: []*spdx.PackageExternalReference{{
			Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL, Locator: goPURL(MainModule, s.Version),
		}},
	}
	doc := &spdx.Document{
		SPDXVersion:    spdx.Version,
		DataLicense:    spdx.DataLicense,
		SPDXIdentifier: "DOCUMENT",
		DocumentName:   name,
		CreationInfo: &spdx.CreationInfo{
			Created:  s.Created.UTC().Format(spdxTime),
			Creators: []common.Creator{{CreatorType: "Organization", Creator: "tether"}, {CreatorType: "Tool", Creator: "tether-release-" + s.Version}},
		},
		Packages: []*spdx.Package{image, main},
	}
	rel := func(a common.ElementID, how string, b common.ElementID) {
		doc.Relationships = append(doc.Relationships, &spdx.Relationship{
			RefA: common.DocElementID{ElementRefID: a}, RefB: common.DocElementID{ElementRefID: b}, Relationship: how})
	}
	rel("DOCUMENT", common.TypeRelationshipDescribe, image.PackageSPDXIdentifier)
	modules := map[common.ElementID]*spdx.Package{}
	toolchains := map[common.ElementID]*spdx.Package{}
	for _, b := range s.Binaries {
		if b.Info == nil || b.Info.Main.Path != MainModule {
			return nil, fmt.Errorf("sbom %s %s: no build info of %s", s.Component, b.Platform, MainModule)
		}
		if len(b.SHA256) != 64 {
			return nil, fmt.Errorf("sbom %s %s: sha256 %q", s.Component, b.Platform, b.SHA256)
		}
		var settings []string
		for _, kv := range b.Info.Settings {
			settings = append(settings, kv.Key+"="+kv.Value)
		}
		bin := &spdx.Package{
			PackageName:             s.Component,
			PackageSPDXIdentifier:   spdxID("Binary", b.Platform),
			PackageVersion:          s.Version,
			PackageFileName:         "/app",
			PackageDownloadLocation: noAssertion,
			PackageChecksums:        []common.Checksum{{Algorithm: common.SHA256, Value: b.SHA256}},
			PrimaryPackagePurpose:   "APPLICATION",
			PackageComment: fmt.Sprintf("The %s image's /app: package %s, built by %s with %s.",
				b.Platform, b.Info.Path, b.Info.GoVersion, strings.Join(settings, " ")),
		}
		doc.Packages = append(doc.Packages, bin)
		rel(image.PackageSPDXIdentifier, common.TypeRelationshipContains, bin.PackageSPDXIdentifier)
		rel(bin.PackageSPDXIdentifier, common.TypeRelationshipGeneratedFrom, main.PackageSPDXIdentifier)
		goID := spdxID("Go", b.Info.GoVersion)
		if toolchains[goID] == nil {
			toolchains[goID] = &spdx.Package{
				PackageName:             "go",
				PackageSPDXIdentifier:   goID,
				PackageVersion:          b.Info.GoVersion,
				PackageDownloadLocation: "https://go.dev/dl/",
				PrimaryPackagePurpose:   "OTHER",
				PackageExternalReferences: []*spdx.PackageExternalReference{{
					Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL,
					Locator: goPURL("stdlib", strings.TrimPrefix(b.Info.GoVersion, "go")),
				}},
				PackageComment: "The Go toolchain that built the binaries, and its standard library linked into them.",
			}
		}
		rel(goID, common.TypeRelationshipBuildToolOf, bin.PackageSPDXIdentifier)
		rel(bin.PackageSPDXIdentifier, common.TypeRelationshipStaticLink, goID)
		for _, d := range b.Info.Deps {
			m := d
			if d.Replace != nil {
				m = d.Replace
			}
			id := spdxID("Module", m.Path, m.Version)
			if modules[id] == nil {
				p := &spdx.Package{
					PackageName:             m.Path,
					PackageSPDXIdentifier:   id,
					PackageVersion:          m.Version,
					PackageDownloadLocation: noAssertion,
					PrimaryPackagePurpose:   "LIBRARY",
					PackageExternalReferences: []*spdx.PackageExternalReference{{
						Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL, Locator: goPURL(m.Path, m.Version),
					}},
				}
				if m.Sum != "" {
					// go.sum's hash (h1: is the SHA-256 of the module's file
					// list, not of its zip, so it is no SPDX checksum).
					p.PackageExternalReferences = append(p.PackageExternalReferences, &spdx.PackageExternalReference{
						Category: common.CategoryOther, RefType: "go-sum", Locator: m.Sum})
				}
				if d.Replace != nil {
					p.PackageComment = "Replaces " + d.Path + "@" + d.Version + " (go.mod's replace)."
				}
				modules[id] = p
			}
			rel(bin.PackageSPDXIdentifier, common.TypeRelationshipStaticLink, id)
		}
	}
	for _, set := range []map[common.ElementID]*spdx.Package{toolchains, modules} {
		ids := make([]string, 0, len(set))
		for id := range set {
			ids = append(ids, string(id))
		}
		sort.Strings(ids)
		for _, id := range ids {
			doc.Packages = append(doc.Packages, set[common.ElementID(id)])
		}
	}
	// The namespace names this document's content: the SHA-256 of the
	// document without it.
	body, err := encodeSPDX(doc)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	doc.DocumentNamespace = Source + "/spdx/" + name + "-" + hex.EncodeToString(sum[:])
	return encodeSPDX(doc)
}

func encodeSPDX(doc *spdx.Document) ([]byte, error) {
	var b bytes.Buffer
	if err := spdxjson.Write(doc, &b, spdxjson.Indent("  "), spdxjson.EscapeHTML(false)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ValidateSBOM reads an SPDX 2.3 JSON document with the SPDX project's Go
// library (tools-golang: its JSON reader and spdxlib.ValidateDocument, which
// checks that every relationship names an element of the document) and
// checks the fields SPDX 2.3 makes mandatory that the library does not:
// the version, data license, document ID, name, namespace (an absolute URI
// without a fragment), creation time and creators, and each package's
// name, unique SPDX ID, download location, and checksums of the right
// length; and that the document describes something.
func ValidateSBOM(data []byte) (*spdx.Document, error) {
	var head struct {
		Version string `json:"spdxVersion"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, err
	}
	if head.Version != spdx.Version {
		return nil, fmt.Errorf("spdxVersion %q, want %s", head.Version, spdx.Version)
	}
	doc, err := spdxjson.Read(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if err := spdxlib.ValidateDocument(doc); err != nil {
		return nil, err
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if doc.DataLicense != spdx.DataLicense {
		bad("dataLicense %q, want %s", doc.DataLicense, spdx.DataLicense)
	}
	if doc.SPDXIdentifier != "DOCUMENT" {
		bad("SPDXID %q, want SPDXRef-DOCUMENT", doc.SPDXIdentifier)
	}
	if doc.DocumentName == "" {
		bad("no name")
	}
	if u, err := url.Parse(doc.DocumentNamespace); err != nil || !u.IsAbs() || strings.Contains(doc.DocumentNamespace, "#") {
		bad("documentNamespace %q: not an absolute URI without '#'", doc.DocumentNamespace)
	}
	if doc.CreationInfo == nil {
		bad("no creationInfo")
	} else {
		if _, err := time.Parse(spdxTime, doc.CreationInfo.Created); err != nil {
			bad("created %q: want %s", doc.CreationInfo.Created, spdxTime)
		}
		if len(doc.CreationInfo.Creators) == 0 {
			bad("no creators")
		}
	}
	ids := map[common.ElementID]bool{}
	for i, p := range doc.Packages {
		if p.PackageName == "" || p.PackageDownloadLocation == "" {
			bad("package %d (%s): name or downloadLocation missing", i, p.PackageSPDXIdentifier)
		}
		if p.PackageSPDXIdentifier == "" || spdxIDUnsafe.MatchString(string(p.PackageSPDXIdentifier)) || ids[p.PackageSPDXIdentifier] {
			bad("package %d: SPDXID %q missing, malformed or not unique", i, p.PackageSPDXIdentifier)
		}
		ids[p.PackageSPDXIdentifier] = true
		if p.FilesAnalyzed && p.PackageVerificationCode == nil {
			bad("package %s: filesAnalyzed without a verification code", p.PackageSPDXIdentifier)
		}
		for _, c := range p.PackageChecksums {
			if want := map[common.ChecksumAlgorithm]int{common.SHA1: 40, common.SHA256: 64, common.SHA512: 128}[c.Algorithm]; want != 0 && !hexOf(c.Value, want) {
				bad("package %s: %s checksum %q", p.PackageSPDXIdentifier, c.Algorithm, c.Value)
			}
		}
	}
	described := false
	for _, r := range doc.Relationships {
		described = described || (r.RefA.ElementRefID == "DOCUMENT" && r.Relationship == common.TypeRelationshipDescribe)
	}
	if !described {
		bad("the document describes nothing")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("not valid SPDX 2.3: %s", strings.Join(problems, "; "))
	}
	return doc, nil
}

func hexOf(s string, n int) bool {
	_, err := hex.DecodeString(s)
	return len(s) == n && err == nil
}
