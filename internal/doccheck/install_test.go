package doccheck

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallSectionOrder holds the README's install section (issue 51,
// item 2) to CheckInstall, and shows the check failing on mutated copies.
func TestInstallSectionOrder(t *testing.T) {
	readme := read(t, filepath.Join(root(t), "README.md"))
	for _, p := range CheckInstall(readme) {
		t.Error(p)
	}
	for _, m := range []struct{ name, old, new, want string }{
		{"apply first", "First, run kube-controller-manager with `--controllers=", "First, run kube-controller-manager with `--controller=", "before KCM's --controllers"},
		{"no production manifest", "tether-production.yaml", "tether-prod.yaml", "tether-production.yaml"},
		{"no macOS checksum", "# macOS: shasum -a 256 -c SHA256SUMS", "", "shasum"},
	} {
		mutated := strings.ReplaceAll(readme, m.old, m.new)
		if mutated == readme {
			t.Fatalf("%s: the README has no %q", m.name, m.old)
		}
		if got := strings.Join(CheckInstall(mutated), "\n"); !strings.Contains(got, m.want) {
			t.Errorf("%s: CheckInstall = %q, want a problem with %q", m.name, got, m.want)
		}
	}
}
