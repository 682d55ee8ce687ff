package doccheck

import (
	"fmt"
	"strings"
)

// CheckInstall returns the problems of the README's "Install a release"
// section (readme is the README's text) that a platform team meets first:
// KCM's binder must be turned off before anything is applied, so the
// --controllers value comes before the first `kubectl apply`; the
// production manifest (no example driver) is named beside the demo's; and
// each checksum line works on macOS too (no sha256sum there).
func CheckInstall(readme string) []string {
	const heading = "## Install a release"
	start := strings.Index(readme, heading)
	if start < 0 {
		return []string{"README.md: no " + heading + " section"}
	}
	section := readme[start+len(heading):]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	line := func(i int) int { return strings.Count(readme[:start+len(heading)+i], "\n") + 1 }
	var out []string
	apply := strings.Index(section, "kubectl apply")
	controllers := strings.Index(section, "--controllers=")
	if apply >= 0 && (controllers < 0 || controllers > apply) {
		out = append(out, fmt.Sprintf("README.md:%d: the first `kubectl apply` of the install comes before KCM's --controllers (turn KCM's binder off first)", line(apply)))
	}
	if !strings.Contains(section, "tether-production.yaml") {
		out = append(out, "README.md: the install section does not name tether-production.yaml (tether without the example driver)")
	}
	for i, l := range strings.Split(section, "\n") {
		if strings.Contains(l, "sha256sum -c") && !strings.Contains(l, "shasum -a 256") {
			out = append(out, fmt.Sprintf("README.md:%d: a sha256sum line without macOS's shasum -a 256", line(0)+i))
		}
	}
	return out
}
