package release

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// semver is a release version: vMAJOR.MINOR.PATCH with an optional
// pre-release (v0.1.0, v0.1.0-rc.1).
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// CheckVersion refuses a version a release cannot carry.
func CheckVersion(v string) error {
	if !semver.MatchString(v) {
		return fmt.Errorf("version %q is not a semantic version like v0.1.0 or v0.1.0-rc.1", v)
	}
	return nil
}

// ReleaseNotes checks version for a release, before anything is built: a
// semantic version (CheckVersion) with a section in root's CHANGELOG.md
// (Notes). It returns that section as the release's notes.
func ReleaseNotes(root, version string) (string, error) {
	if err := CheckVersion(version); err != nil {
		return "", err
	}
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return "", err
	}
	return Notes(changelog, version)
}

// KustomizeImage is how deploy/csi names each component's image (the
// `images:` entries its kustomization sets).
var KustomizeImage = map[string]string{
	"binder":       "ghcr.io/tether-csi/binder",
	"provisioner":  "ghcr.io/tether-csi/provisioner",
	"local-driver": "ghcr.io/tether-csi/local-driver",
}

// Overlay is a kustomization over deploy/csi (at base, relative to the
// overlay) that pins every built image to its tag and index digest.
func Overlay(base string, built []Built) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\nimages:\n", base)
	for _, c := range built {
		name, ok := KustomizeImage[c.Component]
		if !ok {
			return "", fmt.Errorf("no kustomize image name for component %q", c.Component)
		}
		i := strings.LastIndex(c.Ref, ":")
		if i <= strings.LastIndex(c.Ref, "/") || !strings.HasPrefix(c.Digest, "sha256:") {
			return "", fmt.Errorf("component %s: ref %q digest %q", c.Component, c.Ref, c.Digest)
		}
		// A tag with the digest after it: the tag says which release a
		// reader is looking at; the digest is what the kubelet pulls.
		fmt.Fprintf(&b, "  - name: %s\n    newName: %s\n    newTag: %s@%s\n", name, c.Ref[:i], c.Ref[i+1:], c.Digest)
	}
	return b.String(), nil
}

// imageLine finds the image references of rendered manifests.
var imageLine = regexp.MustCompile(`(?m)^\s*(?:- )?image:\s*(\S+)\s*$`)

// CheckPinned refuses a rendered bundle that names :latest, an image
// without a tag, or one of tether's images without a digest.
func CheckPinned(manifests []byte) error {
	var bad []string
	for _, m := range imageLine.FindAllSubmatch(manifests, -1) {
		ref := strings.Trim(string(m[1]), `"'`)
		name, _, _ := strings.Cut(ref, "@")
		i := strings.LastIndex(name, ":")
		switch {
		case i <= strings.LastIndex(name, "/"):
			bad = append(bad, ref+" (no tag)")
		case name[i+1:] == "latest":
			bad = append(bad, ref+" (:latest)")
		case strings.HasPrefix(ref, "ghcr.io/tether-csi/") && !strings.Contains(ref, "@sha256:"):
			bad = append(bad, ref+" (no digest)")
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("images not pinned: %s", strings.Join(bad, ", "))
	}
	return nil
}

// Bundle is one manifests file of a release and the kustomization, a
// folder under deploy/, that it is rendered from.
type Bundle struct {
	File, Dir string
	// Components are the components whose images the bundle names; nil:
	// every one.
	Components []string
}

// Bundles are a release's manifests: tether.yaml, all of deploy/csi (the
// example local driver too), and tether-production.yaml, deploy/production
// (tether without the example driver: the binder's image only).
var Bundles = []Bundle{
	{File: "tether.yaml", Dir: "deploy/csi"},
	{File: "tether-production.yaml", Dir: "deploy/production", Components: []string{"binder"}},
}

// Render is `kubectl kustomize` of dir (a folder under root's deploy/, such
// as deploy/csi) with the images pinned, done in-process by kustomize's own
// library (the version kubectl v1.36 embeds, with kubectl's defaults: no
// plugins, files only under the kustomization's root, the legacy resource
// order), so a release needs Go and nothing else. It refuses manifests
// CheckPinned refuses.
func Render(root, dir string, built []Built) ([]byte, error) {
	if !strings.HasPrefix(filepath.ToSlash(dir), "deploy/") {
		return nil, fmt.Errorf("render %s: not a folder under deploy/", dir)
	}
	tmp, err := os.MkdirTemp("", "tether-bundle-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(filepath.Join(tmp, "deploy"), os.DirFS(filepath.Join(root, "deploy"))); err != nil {
		return nil, err
	}
	k, err := Overlay("../"+filepath.ToSlash(dir), built)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(tmp, "release"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "release", "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified // what kubectl kustomize passes without --reorder
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Join(tmp, "release"))
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	if err := CheckPinned(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Notes is the CHANGELOG section of a version: "## vX.Y.Z ..." or, before
// the version has its own heading, the Unreleased section if it names the
// version's core (an rc of v0.1.0 gets "## Unreleased (v0.1.0)").
func Notes(changelog []byte, version string) (string, error) {
	core, _, _ := strings.Cut(version, "-")
	var sections []struct{ head, body string }
	sc := bufio.NewScanner(bytes.NewReader(changelog))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			sections = append(sections, struct{ head, body string }{head: line})
			continue
		}
		if n := len(sections); n > 0 {
			sections[n-1].body += line + "\n"
		}
	}
	for _, want := range []func(string) bool{
		func(h string) bool { return strings.Fields(h)[1] == version || strings.Fields(h)[1] == "["+version+"]" },
		func(h string) bool { return strings.Contains(h, "Unreleased") && strings.Contains(h, core) },
	} {
		for _, s := range sections {
			if len(strings.Fields(s.head)) > 1 && want(s.head) {
				return fmt.Sprintf("# tether %s\n\n%s\n", version, strings.TrimSpace(s.body)), nil
			}
		}
	}
	return "", fmt.Errorf("CHANGELOG.md has no section for %s (nor an Unreleased one naming %s)", version, core)
}

// WriteSums writes SHA256SUMS for every file of dir but itself and
// ProvenanceFile (which lists SHA256SUMS), in the format `sha256sum -c`
// reads.
func WriteSums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		if e.IsDir() || e.Name() == "SHA256SUMS" || e.Name() == ProvenanceFile {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), e.Name())
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}
