package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The kubectl plugin in a release: one archive per platform, as krew
// installs plugins (tar.gz, zip for Windows), each holding the binary and
// LICENSE, and a krew plugin manifest naming every archive with its
// SHA-256.
const (
	// PluginName is the plugin's name for krew (kubectl tether).
	PluginName = "tether"
	// PluginPackage is the plugin's main package.
	PluginPackage = "./cmd/kubectl-tether"
	// KrewManifestFile is the krew manifest in a release folder. Its
	// contents are what krew's index keeps as plugins/tether.yaml; the
	// folder's tether.yaml is the cluster's manifests.
	KrewManifestFile = "krew-tether.yaml"
	// PluginDownloadURL is where the archives of a release are served:
	// the release page's files, PluginDownloadURL/<version>/<archive>.
	PluginDownloadURL = "https://github.com/tether-csi/tether/releases/download"
	// KrewAPIVersion and KrewKind are those of a krew plugin manifest.
	KrewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	KrewKind       = "Plugin"
	// licenseFile is the license that goes into every archive.
	licenseFile = "LICENSE"
)

// PluginPlatforms are the platforms a release ships kubectl-tether for.
var PluginPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"},
	{OS: "darwin", Architecture: "amd64"}, {OS: "darwin", Architecture: "arm64"},
	{OS: "windows", Architecture: "amd64"}, {OS: "windows", Architecture: "arm64"},
}

// PluginBinaryName is the plugin's file in its archive: kubectl-tether, or
// kubectl-tether.exe on Windows.
func PluginBinaryName(p v1.Platform) string {
	if p.OS == "windows" {
		return "kubectl-tether.exe"
	}
	return "kubectl-tether"
}

// PluginArchiveName names a platform's archive in a release:
// kubectl-tether_<version>_<os>_<arch>.tar.gz, .zip on Windows.
func PluginArchiveName(version string, p v1.Platform) string {
	ext := ".tar.gz"
	if p.OS == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("kubectl-tether_%s_%s_%s%s", version, p.OS, p.Architecture, ext)
}

// PluginArchive is the archive of a platform's binary and, when license is
// not nil, the LICENSE beside it. Entries are in a fixed order with fixed
// owners, modes and the time modified, so equal inputs give equal bytes.
func PluginArchive(p v1.Platform, bin, license []byte, modified time.Time) ([]byte, error) {
	files := []struct {
		name string
		mode os.FileMode
		data []byte
	}{{PluginBinaryName(p), 0o755, bin}}
	if license != nil {
		files = append(files, struct {
			name string
			mode os.FileMode
			data []byte
		}{licenseFile, 0o644, license})
	}
	modified = modified.UTC()
	var buf bytes.Buffer
	if p.OS == "windows" {
		zw := zip.NewWriter(&buf)
		for _, f := range files {
			h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: modified}
			h.SetMode(f.mode)
			w, err := zw.CreateHeader(h)
			if err != nil {
				return nil, err
			}
			if _, err := w.Write(f.data); err != nil {
				return nil, err
			}
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	gz := gzip.NewWriter(&buf) // no name, no time in the gzip header
	tw := tar.NewWriter(gz)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: int64(f.mode), Size: int64(len(f.data)),
			ModTime: modified, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// KrewPlugin is a krew plugin manifest (krew's index format, v1alpha2):
// the fields krew reads, with its names.
type KrewPlugin struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   KrewMetadata   `json:"metadata"`
	Spec       KrewPluginSpec `json:"spec"`
}

// KrewMetadata names the plugin.
type KrewMetadata struct {
	Name string `json:"name"`
}

// KrewPluginSpec is the plugin's version, descriptions and platforms.
type KrewPluginSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage,omitempty"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description,omitempty"`
	Caveats          string         `json:"caveats,omitempty"`
	Platforms        []KrewPlatform `json:"platforms"`
}

// KrewPlatform is one archive: the platforms its selector matches (labels
// os and arch), where it is served, its SHA-256, the files krew copies out
// of it and the binary it links as kubectl-<name>.
type KrewPlatform struct {
	Selector *metav1.LabelSelector `json:"selector"`
	URI      string                `json:"uri"`
	Sha256   string                `json:"sha256"`
	Files    []KrewFile            `json:"files,omitempty"`
	Bin      string                `json:"bin"`
}

// KrewFile is a file krew copies from the unpacked archive.
type KrewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// PluginFile is an archive of a release: its platform, file name and
// SHA-256 (hex).
type PluginFile struct {
	Platform v1.Platform
	Name     string
	SHA256   string
}

// KrewManifest is the krew manifest of a release's plugin archives, served
// under PluginDownloadURL/<version>/.
func KrewManifest(version string, archives []PluginFile, withLicense bool) ([]byte, error) {
	m := KrewPlugin{APIVersion: KrewAPIVersion, Kind: KrewKind, Metadata: KrewMetadata{Name: PluginName},
		Spec: KrewPluginSpec{
			Version:          version,
			Homepage:         "https://github.com/tether-csi/tether",
			ShortDescription: "Say why a PersistentVolumeClaim is Pending",
			Description: "kubectl tether why says why a PersistentVolumeClaim is in its state: the cause and what\n" +
				"to do first, which PV binder runs, the volumes the binder passes over and why, and the\n" +
				"provisioning path. --all-pending lists every claim that waits (-A: in every namespace).\n" +
				"It only reads, and names what it could not read.\n",
		}}
	for _, a := range archives {
		bin := PluginBinaryName(a.Platform)
		files := []KrewFile{{From: bin, To: "."}}
		if withLicense {
			files = append(files, KrewFile{From: licenseFile, To: "."})
		}
		m.Spec.Platforms = append(m.Spec.Platforms, KrewPlatform{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": a.Platform.OS, "arch": a.Platform.Architecture}},
			URI:      PluginDownloadURL + "/" + version + "/" + a.Name,
			Sha256:   a.SHA256,
			Files:    files,
			Bin:      bin,
		})
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return yaml.Marshal(m)
}

// PluginOptions are what WritePlugins needs.
type PluginOptions struct {
	// Root is the module's root folder; its LICENSE, if any, goes into
	// every archive.
	Root, Version string
	// Out is the release folder.
	Out string
	Go  string
}

// WritePlugins builds kubectl-tether for every platform of PluginPlatforms
// (stamped with the version, as BuildBinary builds), checks the build for
// this machine with --version, and writes each platform's archive, dated
// the commit's time, and the krew manifest naming them into o.Out. It
// returns the files written.
func WritePlugins(ctx context.Context, o PluginOptions) ([]string, error) {
	license, err := os.ReadFile(filepath.Join(o.Root, licenseFile))
	if os.IsNotExist(err) {
		license, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	_, modified, err := commit(ctx, o.Root)
	if err != nil {
		return nil, err
	}
	var archives []PluginFile
	var written []string
	for _, p := range PluginPlatforms {
		bin, err := BuildBinary(ctx, BinaryOptions{Root: o.Root, Package: PluginPackage, Version: o.Version, Platform: p, Go: o.Go})
		if err != nil {
			return nil, err
		}
		if err := CheckVersionFlag(ctx, bin, p, o.Version); err != nil {
			return nil, fmt.Errorf("kubectl-tether: %w", err)
		}
		data, err := PluginArchive(p, bin, license, modified)
		if err != nil {
			return nil, err
		}
		name := PluginArchiveName(o.Version, p)
		if err := os.WriteFile(filepath.Join(o.Out, name), data, 0o644); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		archives = append(archives, PluginFile{Platform: p, Name: name, SHA256: hex.EncodeToString(sum[:])})
		written = append(written, name)
	}
	manifest, err := KrewManifest(o.Version, archives, license != nil)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, KrewManifestFile), manifest, 0o644); err != nil {
		return nil, err
	}
	return append(written, KrewManifestFile), nil
}
