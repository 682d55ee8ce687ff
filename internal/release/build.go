package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tether-csi/tether/internal/version"
)

// VersionVar is the variable -ldflags -X sets (internal/version).
const VersionVar = "github.com/tether-csi/tether/internal/version.version"

// BuildOptions are what BuildImages needs.
type BuildOptions struct {
	// Root is the module's root folder.
	Root string
	// Version is stamped into the binaries and is the images' tag.
	Version string
	// Tag, if set, tags the images instead of Version (the test harness
	// tags them "e2e"; the binaries still say Version).
	Tag string
	// Registry prefixes the images' names: <Registry>/<component>:<tag>.
	Registry string
	// Platforms to build for (default Platforms).
	Platforms []v1.Platform
	// Components to build (default Components).
	Components []Component
	// Out is the folder for the archives.
	Out string
	// Go is the go command (default "go").
	Go string
	// Log reports progress; nil is quiet.
	Log func(format string, args ...any)
}

// Built is one component's images, as written.
type Built struct {
	Component string `json:"component"`
	// Ref is the image's name and tag, <Registry>/<component>:<Version>.
	Ref string `json:"ref"`
	// Digest is the multi-platform index's digest: what a registry serves
	// for Ref once Push put the images there, and what tether.yaml pins.
	Digest string `json:"digest"`
	// File is the component's archive (ArchiveName): the index and every
	// platform's image.
	File string `json:"file"`
	// Platforms are the index's images, by "os/arch".
	Platforms map[string]PlatformImage `json:"platforms"`
}

// PlatformImage is one platform's image of a component.
type PlatformImage struct {
	// Digest is the image manifest's digest; Config its config's (the
	// image ID containerd's CRI reports; a pod's imageID is the
	// <repo>@<index digest> the archive names, see WriteArchive).
	Digest string `json:"digest"`
	Config string `json:"config"`
}

// ArchiveName names a component's archive.
func ArchiveName(component, version string) string {
	return fmt.Sprintf("tether-%s_%s.oci.tar", component, version)
}

// BuildImages builds every component for every platform, writes one
// archive per component (all its platforms) and its SBOM (SBOM, from the
// binaries' build info) into o.Out, and returns what it wrote (also
// written to o.Out/images.json).
func BuildImages(ctx context.Context, o BuildOptions) ([]Built, error) {
	if o.Go == "" {
		o.Go = "go"
	}
	if len(o.Platforms) == 0 {
		o.Platforms = Platforms
	}
	if len(o.Components) == 0 {
		o.Components = Components
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Tag == "" {
		o.Tag = o.Version
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	revision, created, err := commit(ctx, o.Root)
	if err != nil {
		return nil, err
	}
	var all []Built
	for _, c := range o.Components {
		b := Built{Component: c.Name, Ref: fmt.Sprintf("%s/%s:%s", strings.TrimSuffix(o.Registry, "/"), c.Name, o.Tag),
			File: ArchiveName(c.Name, o.Tag), Platforms: map[string]PlatformImage{}}
		var images []v1.Image
		var binaries []SBOMBinary
		for _, p := range o.Platforms {
			bin, err := BuildBinary(ctx, BinaryOptions{Root: o.Root, Package: c.Package, Version: o.Version, Platform: p, Go: o.Go})
			if err != nil {
				return nil, err
			}
			if err := CheckVersionFlag(ctx, bin, p, o.Version); err != nil {
				return nil, fmt.Errorf("%s: %w", c.Name, err)
			}
			info, err := buildinfo.Read(bytes.NewReader(bin))
			if err != nil {
				return nil, fmt.Errorf("%s %s/%s: build info: %w", c.Name, p.OS, p.Architecture, err)
			}
			sum := sha256.Sum256(bin)
			binaries = append(binaries, SBOMBinary{Platform: p.OS + "/" + p.Architecture, SHA256: hex.EncodeToString(sum[:]), Info: info})
			img, err := NewImage(ImageSpec{Binary: bin, Platform: p, Version: o.Version, Revision: revision, Created: created})
			if err != nil {
				return nil, fmt.Errorf("%s %s/%s: %w", c.Name, p.OS, p.Architecture, err)
			}
			d, err := img.Digest()
			if err != nil {
				return nil, err
			}
			cfg, err := img.ConfigName()
			if err != nil {
				return nil, err
			}
			b.Platforms[p.OS+"/"+p.Architecture] = PlatformImage{Digest: d.String(), Config: cfg.String()}
			images = append(images, img)
			o.Log("%s %s/%s %s (%d bytes of binary)", b.Ref, p.OS, p.Architecture, d, len(bin))
		}
		// The index lists the platforms in o.Platforms' order.
		idx, err := NewIndex(images)
		if err != nil {
			return nil, err
		}
		if err := WriteArchive(filepath.Join(o.Out, b.File), b.Ref, idx); err != nil {
			return nil, fmt.Errorf("%s: %w", b.File, err)
		}
		d, err := idx.Digest()
		if err != nil {
			return nil, err
		}
		b.Digest = d.String()
		sbom, err := SBOM(SBOMSpec{Component: c.Name, Ref: b.Ref, Digest: b.Digest, Version: o.Version, Revision: revision,
			Created: created, Binaries: binaries})
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(o.Out, SBOMName(c.Name, o.Tag)), sbom, 0o644); err != nil {
			return nil, err
		}
		all = append(all, b)
	}
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return nil, err
	}
	return all, os.WriteFile(filepath.Join(o.Out, "images.json"), append(data, '\n'), 0o644)
}

// BinaryOptions are what BuildBinary needs.
type BinaryOptions struct {
	Root, Package, Version string
	Platform               v1.Platform
	Go                     string
}

// BuildBinary builds a static binary of a main package for a platform,
// stamped with the version, and returns its bytes. -trimpath and a fixed
// toolchain make it the same from the same commit.
func BuildBinary(ctx context.Context, o BinaryOptions) ([]byte, error) {
	if o.Go == "" {
		o.Go = "go"
	}
	dir, err := os.MkdirTemp("", "tether-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "app")
	cmd := exec.CommandContext(ctx, o.Go, "build", "-trimpath", "-tags", version.BuildTags, "-ldflags", "-s -w -X "+VersionVar+"="+o.Version, "-o", out, o.Package)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+o.Platform.OS, "GOARCH="+o.Platform.Architecture, "GOFLAGS=-mod=readonly")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s for %s/%s: %v\n%s", o.Package, o.Platform.OS, o.Platform.Architecture, err, stderr.String())
	}
	return os.ReadFile(out)
}

// commit is the tree's commit and its time (the images' creation time);
// outside git, "unknown" and the Unix epoch. SOURCE_DATE_EPOCH overrides
// the time, as the reproducible-builds convention has it.
func commit(ctx context.Context, root string) (string, time.Time, error) {
	revision, created := "unknown", time.Unix(0, 0).UTC()
	out, err := exec.CommandContext(ctx, "git", "-C", root, "log", "-1", "--format=%H %ct").Output()
	if err == nil {
		if f := strings.Fields(string(out)); len(f) == 2 {
			revision = f[0]
			if s, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				created = time.Unix(s, 0).UTC()
			}
		}
	}
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", v, err)
		}
		created = time.Unix(s, 0).UTC()
	}
	return revision, created, nil
}

// CheckVersionFlag runs a binary built for this machine's platform with
// --version and wants the version in what it prints; a binary for another
// platform is not run.
func CheckVersionFlag(ctx context.Context, bin []byte, p v1.Platform, version string) error {
	if p.OS != runtime.GOOS || p.Architecture != runtime.GOARCH {
		return nil
	}
	dir, err := os.MkdirTemp("", "tether-version-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "app")
	if err := os.WriteFile(file, bin, 0o755); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, file, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("--version: %v: %s", err, out)
	}
	if f := strings.Fields(string(out)); len(f) == 0 || f[len(f)-1] != version {
		return fmt.Errorf("--version printed %q, want %s", strings.TrimSpace(string(out)), version)
	}
	return nil
}
