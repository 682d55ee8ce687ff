package release

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ManifestsFile names the tether.yaml that Push writes into a bundle for
// a registry: tether-<registry>.yaml, every character of the registry but
// letters, digits, '.' and '-' made '_' (registry.example.com/tether gives
// tether-registry.example.com_tether.yaml).
func ManifestsFile(registry string) string {
	return "tether-" + unsafeChars.ReplaceAllString(strings.TrimSuffix(registry, "/"), "_") + ".yaml"
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9.-]`)

// Retarget rewrites a bundle's tether.yaml for the registry Push put its
// images in: every image line naming a component's pin <Ref>@<Digest>
// names Target(b, registry)@<Digest> instead. The digests do not change
// (the bytes are the same), nor does anything else. It fails if a
// component's pin is on no image line: the manifests are not the bundle's.
func Retarget(manifests []byte, built []Built, registry string) ([]byte, error) {
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
		if !seen[b.Ref+"@"+b.Digest] {
			return nil, fmt.Errorf("tether.yaml has no image %s@%s (images.json's %s)", b.Ref, b.Digest, b.Component)
		}
	}
	return out, CheckPinned(out)
}

// writeRetargeted writes dir's tether.yaml retargeted to registry as
// ManifestsFile(registry) beside it, and returns that file's path; "" if
// dir has no tether.yaml (an images folder) or it names registry already.
func writeRetargeted(dir string, built []Built, registry string) (string, error) {
	manifests, err := os.ReadFile(filepath.Join(dir, "tether.yaml"))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	out, err := Retarget(manifests, built, registry)
	if err != nil {
		return "", err
	}
	if bytes.Equal(out, manifests) {
		return "", nil
	}
	file := filepath.Join(dir, ManifestsFile(registry))
	return file, os.WriteFile(file, out, 0o644)
}
