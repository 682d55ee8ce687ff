package release

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spdx/tools-golang/spdx"
)

// Verified is what VerifyRelease checked.
type Verified struct {
	Files    int      // SHA256SUMS's files, each with its digest
	SBOMs    []string // the SBOMs, valid, one per image archive
	Binaries int      // binaries in the archives, each the one its SBOM names
}

// VerifyRelease checks a release folder's supply-chain files: every file
// SHA256SUMS lists has that digest; each image archive of images.json has
// its SBOM, listed in SHA256SUMS and valid (ValidateSBOM), whose binary
// for each platform has the SHA-256 of the /app in that platform's image
// of the archive; and ProvenanceFile is valid (ValidateProvenance) with
// SHA256SUMS's files and SHA256SUMS itself as its subjects.
func VerifyRelease(dir string) (Verified, error) {
	var v Verified
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		return v, err
	}
	listed, err := ParseSums(sums)
	if err != nil {
		return v, err
	}
	for name, want := range listed {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return v, err
		}
		if got := sha256Hex(data); got != want {
			return v, fmt.Errorf("%s: sha256 %s, SHA256SUMS says %s", name, got, want)
		}
	}
	v.Files = len(listed)
	built, err := ReadBuilt(dir)
	if err != nil {
		return v, err
	}
	for _, b := range built {
		_, tag, _ := splitTag(b.Ref)
		name := SBOMName(b.Component, tag)
		if listed[name] == "" {
			return v, fmt.Errorf("%s: not in SHA256SUMS", name)
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return v, err
		}
		doc, err := ValidateSBOM(data)
		if err != nil {
			return v, fmt.Errorf("%s: %w", name, err)
		}
		n, err := checkBinaries(filepath.Join(dir, b.File), doc)
		if err != nil {
			return v, fmt.Errorf("%s against %s: %w", name, b.File, err)
		}
		v.SBOMs = append(v.SBOMs, name)
		v.Binaries += n
	}
	data, err := os.ReadFile(filepath.Join(dir, ProvenanceFile))
	if err != nil {
		return v, err
	}
	st, _, err := ValidateProvenance(data)
	if err != nil {
		return v, fmt.Errorf("%s: %w", ProvenanceFile, err)
	}
	if err := CheckSubjects(st, sums); err != nil {
		return v, fmt.Errorf("%s: %w", ProvenanceFile, err)
	}
	return v, nil
}

// checkBinaries fails unless every platform image of an archive has an
// /app whose SHA-256 is the one the SBOM gives its binary for that
// platform, and the SBOM names no binary the archive lacks. It returns how
// many it compared.
func checkBinaries(archive string, doc *spdx.Document) (int, error) {
	want := map[string]string{}
	for _, p := range doc.Packages {
		if p.PrimaryPackagePurpose == "APPLICATION" && len(p.PackageChecksums) == 1 {
			want[string(p.PackageSPDXIdentifier)] = p.PackageChecksums[0].Value
		}
	}
	tmp, err := os.MkdirTemp("", "tether-verify-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	a, err := ReadArchive(archive, tmp)
	if err != nil {
		return 0, err
	}
	m, err := a.Index.IndexManifest()
	if err != nil {
		return 0, err
	}
	for _, d := range m.Manifests {
		if d.Platform == nil {
			return 0, fmt.Errorf("manifest %s has no platform", d.Digest)
		}
		id := string(spdxID("Binary", d.Platform.OS+"/"+d.Platform.Architecture))
		img, err := a.Index.Image(d.Digest)
		if err != nil {
			return 0, err
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			return 0, fmt.Errorf("%s: %d layers, %v", d.Digest, len(layers), err)
		}
		got, err := appDigest(layers[0].Uncompressed)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", d.Digest, err)
		}
		if want[id] != got {
			return 0, fmt.Errorf("%s/%s: /app sha256 %s, the SBOM says %q", d.Platform.OS, d.Platform.Architecture, got, want[id])
		}
		delete(want, id)
	}
	if len(want) > 0 {
		return 0, fmt.Errorf("the SBOM names %d binaries in no image of the archive", len(want))
	}
	return len(m.Manifests), nil
}

// appDigest is the SHA-256 of a layer's app file.
func appDigest(open func() (io.ReadCloser, error)) (string, error) {
	rc, err := open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", errors.New("no /app")
		}
		if err != nil {
			return "", err
		}
		if h.Name == "app" || h.Name == "/app" || h.Name == "./app" {
			s := sha256.New()
			if _, err := io.Copy(s, tr); err != nil {
				return "", err
			}
			return hex.EncodeToString(s.Sum(nil)), nil
		}
	}
}
