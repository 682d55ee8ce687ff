package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

var (
	pluginNameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	sha256RE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Validate checks what krew requires of a manifest (a plugin name without
// the kubectl- prefix, a semantic version, a short description, and for
// every platform a selector, an https URI, a SHA-256, a binary and files
// with both ends), and that each platform of PluginPlatforms is selected by
// exactly one of its platforms and every platform selects one of them.
func (m KrewPlugin) Validate() error {
	switch {
	case m.APIVersion != KrewAPIVersion || m.Kind != KrewKind:
		return fmt.Errorf("apiVersion %q, kind %q: want %s, %s", m.APIVersion, m.Kind, KrewAPIVersion, KrewKind)
	case !pluginNameRE.MatchString(m.Metadata.Name) || strings.HasPrefix(m.Metadata.Name, "kubectl-"):
		return fmt.Errorf("plugin name %q: want lower-case letters, digits and dashes, without kubectl-", m.Metadata.Name)
	case m.Spec.ShortDescription == "":
		return errors.New("spec.shortDescription is empty")
	case len(m.Spec.Platforms) == 0:
		return errors.New("spec.platforms is empty")
	}
	if err := CheckVersion(m.Spec.Version); err != nil {
		return fmt.Errorf("spec.version: %w", err)
	}
	selected := make([]int, len(PluginPlatforms))
	for i, p := range m.Spec.Platforms {
		where := fmt.Sprintf("spec.platforms[%d]", i)
		if p.Selector == nil {
			return fmt.Errorf("%s: no selector", where)
		}
		sel, err := metav1.LabelSelectorAsSelector(p.Selector)
		if err != nil {
			return fmt.Errorf("%s: selector: %w", where, err)
		}
		if u, err := url.Parse(p.URI); err != nil || u.Scheme != "https" || u.Host == "" || path.Base(u.Path) == "/" {
			return fmt.Errorf("%s: uri %q: want https://HOST/.../ARCHIVE", where, p.URI)
		}
		if !sha256RE.MatchString(p.Sha256) {
			return fmt.Errorf("%s: sha256 %q: want 64 lower-case hex digits", where, p.Sha256)
		}
		if p.Bin == "" {
			return fmt.Errorf("%s: no bin", where)
		}
		for _, f := range p.Files {
			if f.From == "" || f.To == "" {
				return fmt.Errorf("%s: files: from %q to %q: want both", where, f.From, f.To)
			}
		}
		matched := false
		for j, pp := range PluginPlatforms {
			if sel.Matches(labels.Set{"os": pp.OS, "arch": pp.Architecture}) {
				selected[j]++
				matched = true
			}
		}
		if !matched {
			return fmt.Errorf("%s: selector %s selects none of the plugin's platforms", where, sel)
		}
	}
	for j, n := range selected {
		if n != 1 {
			return fmt.Errorf("%s/%s is selected by %d platforms, want 1", PluginPlatforms[j].OS, PluginPlatforms[j].Architecture, n)
		}
	}
	return nil
}

// ReadKrewManifest parses a krew manifest strictly: a field krew's format
// does not have is an error.
func ReadKrewManifest(data []byte) (KrewPlugin, error) {
	var m KrewPlugin
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		return m, fmt.Errorf("krew manifest: %w", err)
	}
	return m, m.Validate()
}

// CheckKrewManifest checks a release folder's krew manifest: it parses and
// is valid (ReadKrewManifest), each platform's archive (its URI's last
// element) is in dir with the SHA-256 the manifest says, and holds every
// file the manifest copies out of it, the binary among them. It returns
// how many archives it checked.
func CheckKrewManifest(dir string) (int, error) {
	data, err := os.ReadFile(filepath.Join(dir, KrewManifestFile))
	if err != nil {
		return 0, err
	}
	m, err := ReadKrewManifest(data)
	if err != nil {
		return 0, err
	}
	for _, p := range m.Spec.Platforms {
		u, _ := url.Parse(p.URI)
		name := path.Base(u.Path)
		archive, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p.URI, err)
		}
		sum := sha256.Sum256(archive)
		if got := hex.EncodeToString(sum[:]); got != p.Sha256 {
			return 0, fmt.Errorf("%s: sha256 %s, the manifest says %s", name, got, p.Sha256)
		}
		entries, err := archiveEntries(name, archive)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		bin := false
		for _, f := range p.Files {
			if _, ok := entries[f.From]; !ok {
				return 0, fmt.Errorf("%s: no %s in it", name, f.From)
			}
			bin = bin || (f.From == p.Bin && (f.To == "." || f.To == p.Bin))
		}
		if len(p.Files) == 0 {
			_, bin = entries[p.Bin]
		}
		if !bin {
			return 0, fmt.Errorf("%s: bin %s is not a file copied out of it", name, p.Bin)
		}
		if mode := entries[p.Bin]; !strings.HasSuffix(name, ".zip") && mode&0o111 == 0 {
			return 0, fmt.Errorf("%s: %s is not executable (mode %o)", name, p.Bin, mode)
		}
	}
	return len(m.Spec.Platforms), nil
}

// archiveEntries are the regular files of a .tar.gz or .zip, with their
// modes.
func archiveEntries(name string, data []byte) (map[string]os.FileMode, error) {
	out := map[string]os.FileMode{}
	switch {
	case strings.HasSuffix(name, ".zip"):
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, err
		}
		for _, f := range zr.File {
			if !f.FileInfo().IsDir() {
				out[f.Name] = f.Mode().Perm()
			}
		}
	case strings.HasSuffix(name, ".tar.gz"):
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			if h.Typeflag == tar.TypeReg {
				out[h.Name] = os.FileMode(h.Mode).Perm()
			}
		}
	default:
		return nil, errors.New("neither .tar.gz nor .zip")
	}
	return out, nil
}
