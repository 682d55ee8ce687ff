package doccheck

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	changelogVersion = regexp.MustCompile(`^## .*?\b(v[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?)\b`)
	semver           = `(v[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)*)`
	// versionInLine are the places a line gives tether's version: an
	// image of tether's, a release file or folder, a make or release
	// tool setting, a go install of tether's module.
	versionInLine = []*regexp.Regexp{
		regexp.MustCompile(`ghcr\.io/tether-csi/[a-z0-9-]+:` + semver),
		regexp.MustCompile(`(?:^|[^A-Za-z0-9.-])(?:kubectl-tether|tether-push|tether-[a-z-]+)_` + semver + `_`),
		regexp.MustCompile(`_out/(?:release|images)/` + semver),
		regexp.MustCompile(`tether-csi/tether/releases/(?:download|tag)/` + semver),
		regexp.MustCompile(`\bVERSION=` + semver),
		regexp.MustCompile(`-version[ =]` + semver),
		regexp.MustCompile(`github\.com/tether-csi/tether/[a-z0-9/-]*@` + semver),
		regexp.MustCompile(`^appVersion:\s*"?(v?[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)*)`), // a Helm chart of tether's
		regexp.MustCompile(`\| default "` + semver + `"`),                                    // a Helm template's default tag
	}
	// yamlImage is a line of YAML that names an image's repository, and
	// yamlTag one that gives its tag (kustomize's newTag, a chart's tag).
	yamlImage = regexp.MustCompile(`^\s*-?\s*(?:name|newName|repository|image):\s*(\S+)`)
	yamlTag   = regexp.MustCompile(`^\s*-?\s*(?:newTag|tag):\s*"?` + semver)
)

// ChangelogVersion is the version CHANGELOG.md's first section names
// ("## Unreleased (v0.1.0)", "## v0.1.0 (2026-12-01)"): the one version
// of tether every other place gives.
func ChangelogVersion(changelog string) (string, error) {
	for _, l := range strings.Split(changelog, "\n") {
		if !strings.HasPrefix(l, "## ") {
			continue
		}
		if m := changelogVersion.FindStringSubmatch(l); m != nil {
			return m[1], nil
		}
		return "", fmt.Errorf("CHANGELOG.md's first section %q names no version vX.Y.Z", l)
	}
	return "", fmt.Errorf("CHANGELOG.md has no section")
}

// VersionRefs returns where text gives a version of tether: the places
// of versionInLine (a Helm chart's appVersion among them: text is
// tether's own files), and in YAML a tag line (newTag:, tag:) whose image,
// the last name, newName, repository or image line above it, is one of
// ghcr.io/tether-csi.
func VersionRefs(text string) []Ref {
	var refs []Ref
	image := ""
	for i, l := range strings.Split(text, "\n") {
		for _, re := range versionInLine {
			for _, m := range re.FindAllStringSubmatch(l, -1) {
				refs = append(refs, Ref{Name: m[1], Line: i + 1})
			}
		}
		if m := yamlImage.FindStringSubmatch(l); m != nil {
			image = m[1]
		}
		if m := yamlTag.FindStringSubmatch(l); m != nil && strings.HasPrefix(image, "ghcr.io/tether-csi/") {
			refs = append(refs, Ref{Name: m[1], Line: i + 1})
		}
	}
	return refs
}

// CheckVersions returns a problem, "path:line: ...", for each version in
// refs that is not want (a chart's appVersion may leave out the v). A
// pre-release of want (v0.1.0-rc.1, or v0.1.0-kind for a test's bundle)
// agrees with it.
func CheckVersions(path string, refs []Ref, want string) []string {
	core, _, _ := strings.Cut(strings.TrimPrefix(want, "v"), "-")
	var problems []string
	for _, r := range refs {
		if c, _, _ := strings.Cut(strings.TrimPrefix(r.Name, "v"), "-"); c != core {
			problems = append(problems, fmt.Sprintf("%s:%d: tether %s, but CHANGELOG.md's first section is %s", path, r.Line, r.Name, want))
		}
	}
	return problems
}
