package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestPluginArchive: equal inputs give equal bytes; a tar.gz (a zip on
// Windows) with the binary, executable, and LICENSE.
func TestPluginArchive(t *testing.T) {
	for _, p := range PluginPlatforms {
		a, err := PluginArchive(p, []byte("bin-"+p.OS), []byte("license"), created)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := PluginArchive(p, []byte("bin-"+p.OS), []byte("license"), created)
		if !bytes.Equal(a, b) {
			t.Errorf("%s/%s: two archives of the same inputs differ", p.OS, p.Architecture)
		}
		name := PluginArchiveName("v0.1.0", p)
		if (p.OS == "windows") != strings.HasSuffix(name, ".zip") || (p.OS != "windows") != strings.HasSuffix(name, ".tar.gz") {
			t.Errorf("%s/%s: archive %s", p.OS, p.Architecture, name)
		}
		entries, err := archiveEntries(name, a)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 2 || entries[licenseFile] != 0o644 || entries[PluginBinaryName(p)] != 0o755 {
			t.Errorf("%s: entries %v", name, entries)
		}
	}
	a, _ := PluginArchive(PluginPlatforms[0], []byte("bin"), nil, created)
	if entries, _ := archiveEntries("x.tar.gz", a); len(entries) != 1 {
		t.Errorf("without a license: entries %v", entries)
	}
}

// releaseDir writes plugin archives of fake binaries and their krew
// manifest into a folder, as WritePlugins does with built ones; mutate, if
// not nil, changes an archive after its checksum is taken (nil: none).
func releaseDir(t *testing.T, mutate func(p v1.Platform, bin []byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	var files []PluginFile
	for _, p := range PluginPlatforms {
		data, err := PluginArchive(p, []byte("bin"), []byte("license"), created)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		name := PluginArchiveName("v0.1.0", p)
		if mutate != nil {
			data = mutate(p, data)
		}
		files = append(files, PluginFile{Platform: p, Name: name, SHA256: hex.EncodeToString(sum[:])})
		if data == nil { // mutate removed it
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := KrewManifest("v0.1.0", files, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, KrewManifestFile), m, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheckKrewManifest(t *testing.T) {
	dir := releaseDir(t, nil)
	if n, err := CheckKrewManifest(dir); err != nil || n != len(PluginPlatforms) {
		t.Fatalf("CheckKrewManifest = %d, %v; want %d archives", n, err, len(PluginPlatforms))
	}
	manifest, _ := os.ReadFile(filepath.Join(dir, KrewManifestFile))
	for _, want := range []string{"apiVersion: " + KrewAPIVersion, "kind: Plugin", "name: tether", "version: v0.1.0",
		"uri: " + PluginDownloadURL + "/v0.1.0/kubectl-tether_v0.1.0_windows_arm64.zip", "bin: kubectl-tether.exe",
		"matchLabels:\n        arch: arm64\n        os: darwin", "- from: LICENSE\n      to: ."} {
		if !strings.Contains(string(manifest), want) {
			t.Errorf("%q not in the manifest:\n%s", want, manifest)
		}
	}
	edit := func(old, new string) func(string) string {
		return func(s string) string { return strings.Replace(s, old, new, 1) }
	}
	tests := []struct {
		name    string
		edit    func(string) string
		archive func(v1.Platform, []byte) []byte
		wantErr string
	}{
		{name: "not YAML", edit: func(string) string { return "\t: [" }, wantErr: "krew manifest"},
		{name: "a field krew has not", edit: edit("  version:", "  versions: x\n  version:"), wantErr: `unknown field "versions"`},
		{name: "another kind", edit: edit("kind: Plugin", "kind: Index"), wantErr: "kind"},
		{name: "kubectl- in the name", edit: edit("name: tether", "name: kubectl-tether"), wantErr: "plugin name"},
		{name: "no v in the version", edit: edit("version: v0.1.0", "version: 0.1.0"), wantErr: "spec.version"},
		{name: "no short description", edit: edit("shortDescription: Say why a PersistentVolumeClaim is Pending", "shortDescription: \"\""), wantErr: "spec.shortDescription is empty"},
		{name: "http", edit: edit("uri: https://", "uri: http://"), wantErr: "want https"},
		{name: "a platform twice", edit: edit("arch: arm64\n        os: darwin", "arch: amd64\n        os: darwin"), wantErr: "darwin/amd64 is selected by 2"},
		{name: "a checksum changed", edit: func(s string) string {
			i := strings.Index(s, "sha256: ") + len("sha256: ")
			return s[:i] + strings.Repeat("f", 64) + s[i+64:]
		}, wantErr: "the manifest says ffff"},
		{name: "an archive other than built", archive: func(p v1.Platform, data []byte) []byte {
			if p.OS == "linux" {
				return append(data, 0)
			}
			return data
		}, wantErr: "kubectl-tether_v0.1.0_linux_amd64.tar.gz: sha256"},
		{name: "a bin not in the files", edit: edit("bin: kubectl-tether\n", "bin: tether\n"), wantErr: "bin tether is not a file copied"},
		{name: "a file not in the archive", edit: edit("- from: LICENSE", "- from: LICENSE.md"), wantErr: "no LICENSE.md in it"},
		{name: "an archive missing", archive: func(p v1.Platform, data []byte) []byte {
			if p.OS == "windows" {
				return nil
			}
			return data
		}, wantErr: "kubectl-tether_v0.1.0_windows_amd64.zip: no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := releaseDir(t, tt.archive)
			if tt.edit != nil {
				file := filepath.Join(dir, KrewManifestFile)
				b, _ := os.ReadFile(file)
				if err := os.WriteFile(file, []byte(tt.edit(string(b))), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := CheckKrewManifest(dir); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("CheckKrewManifest: %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestPluginArchiveTime: the archive's files carry the time given (the
// commit's), not the build's.
func TestPluginArchiveTime(t *testing.T) {
	a, err := PluginArchive(PluginPlatforms[0], []byte("bin"), nil, created)
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	h, err := tar.NewReader(gz).Next()
	if err != nil {
		t.Fatal(err)
	}
	if !h.ModTime.Equal(created) || h.Uid != 0 || h.Uname != "" {
		t.Errorf("header %+v", h)
	}
	_, _ = io.Copy(io.Discard, gz)
}
