package release

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// ManifestsFile names the tether.yaml that Push writes into a bundle for
// a registry: tether-<registry>.yaml, every character of the registry but
// letters, digits, '.' and '-' made '_' (registry.example.com/tether gives
// tether-registry.example.com_tether.yaml).
func ManifestsFile(registry string) string {
	return RetargetedFile("tether.yaml", registry)
}

// RetargetedFile names the copy of a bundle's manifests file (one of
// Bundles) that Push writes for a registry: tether-production.yaml gives
// tether-production-<registry>.yaml, the registry as in ManifestsFile.
func RetargetedFile(file, registry string) string {
	return strings.TrimSuffix(file, ".yaml") + "-" + unsafeChars.ReplaceAllString(strings.TrimSuffix(registry, "/"), "_") + ".yaml"
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9.-]`)

// Retarget rewrites a bundle's tether.yaml for the registry Push put its
// images in: every image line naming a component's pin <Ref>@<Digest>
// names Target(b, registry)@<Digest> instead. The digests do not change
// (the bytes are the same), nor does anything else. It fails if a
// component's pin is on no image line: the manifests are not the bundle's.
func Retarget(manifests []byte, built []Built, registry string) ([]byte, error) {
	return retarget(manifests, built, registry, nil)
}

// retarget is Retarget that wants the pins of the named components only
// (nil: every one), for a bundle that names some of the images.
func retarget(manifests []byte, built []Built, registry string, components []string) ([]byte, error) {
	to := map[string]string{}
	seen := map[string]bool{}
	for _, b := range built {
		to[b.Ref+"@"+b.Digest] = Target(b, registry) + "@" + b.Digest
	}
	out := imageLine.ReplaceAllFunc(manifests, func(line []byte) []byte {
		m := imageLine.FindSubmatchIndex(line)
		ref := strings.Trim(string(line[m[2]:m[3]]), `"'`)
		next, ok := to[ref]
		if !ok {
			return line
		}
		seen[ref] = true
		return bytes.Replace(line, []byte(ref), []byte(next), 1)
	})
	for _, b := range built {
		if !seen[b.Ref+"@"+b.Digest] && (components == nil || slices.Contains(components, b.Component)) {
			return nil, fmt.Errorf("no image %s@%s (images.json's %s)", b.Ref, b.Digest, b.Component)
		}
	}
	return out, CheckPinned(out)
}

// writeRetargeted writes each of dir's Bundles retargeted to registry as
// RetargetedFile(file, registry) beside it, and returns the paths it
// wrote: none for a bundle dir does not hold (an images folder) or one
// that names registry already.
func writeRetargeted(dir string, built []Built, registry string) ([]string, error) {
	var files []string
	for _, b := range Bundles {
		manifests, err := os.ReadFile(filepath.Join(dir, b.File))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return files, err
		}
		out, err := retarget(manifests, built, registry, b.Components)
		if err != nil {
			return files, fmt.Errorf("%s: %w", b.File, err)
		}
		if bytes.Equal(out, manifests) {
			continue
		}
		file := filepath.Join(dir, RetargetedFile(b.File, registry))
		if err := os.WriteFile(file, out, 0o644); err != nil {
			return files, err
		}
		files = append(files, file)
	}
	return files, nil
}
