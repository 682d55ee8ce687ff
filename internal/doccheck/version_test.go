package doccheck

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestChangelogVersion(t *testing.T) {
	for _, tc := range []struct{ md, want, err string }{
		{"# Changelog\n\n## Unreleased (v0.2.0)\n\n## v0.1.0 (2026-12-01)\n", "v0.2.0", ""},
		{"# Changelog\n\n## v0.1.0-rc.1 (2026-12-01)\n", "v0.1.0-rc.1", ""},
		{"# Changelog\n\n## Unreleased\n\n## v0.1.0\n", "", "names no version"},
		{"# Changelog\n", "", "no section"},
	} {
		got, err := ChangelogVersion(tc.md)
		if got != tc.want || (err == nil) != (tc.err == "") {
			t.Errorf("%q: got %q, %v; want %q, %q", tc.md, got, err, tc.want, tc.err)
		}
	}
}

func TestVersionRefs(t *testing.T) {
	text := "- `ghcr.io/tether-csi/binder:v0.1.0@sha256:x`, and ghcr.io/tether-csi/provisioner:<tag>\n" +
		"| `kubectl-tether_v0.1.0_<os>_<arch>` | `tether-push_v0.1.0_linux_amd64` |\n" +
		"make release VERSION=v0.1.0-kind; go run ./hack/release push -dir _out/release/v0.2.0\n" +
		"go run github.com/tether-csi/tether/cmd/tether-push@v0.1.0 -version v0.1.0\n" +
		"https://github.com/tether-csi/tether/releases/download/v0.1.0/tether.yaml, kind v0.33.0, staticcheck (v0.8.2), `registry.k8s.io/sig-storage/csi-provisioner:v6.3.0`\n" +
		"images:\n  - name: tether-binder\n    newName: ghcr.io/tether-csi/binder\n    newTag: v0.3.0\n" +
		"  - name: node-driver-registrar\n    newName: registry.k8s.io/sig-storage/csi-node-driver-registrar\n    newTag: v2.13.0\n" +
		"image:\n  repository: ghcr.io/tether-csi/provisioner\n  tag: v0.1.0 # the tether release\n" +
		"appVersion: \"v0.2.0\"\nversion: 0.1.0\n" +
		"{{- $tag := .tag | default \"v0.1.0\" -}}\n"
	want := []Ref{
		{Name: "v0.1.0", Line: 1},
		{Name: "v0.1.0", Line: 2}, {Name: "v0.1.0", Line: 2},
		{Name: "v0.2.0", Line: 3}, {Name: "v0.1.0-kind", Line: 3},
		{Name: "v0.1.0", Line: 4}, {Name: "v0.1.0", Line: 4},
		{Name: "v0.1.0", Line: 5},
		{Name: "v0.3.0", Line: 9},
		{Name: "v0.1.0", Line: 15},
		{Name: "v0.2.0", Line: 16},
		{Name: "v0.1.0", Line: 18},
	}
	got := VersionRefs(text)
	slices.SortStableFunc(got, func(a, b Ref) int { return a.Line - b.Line })
	if !slices.Equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestCheckVersions(t *testing.T) {
	refs := []Ref{{Name: "v0.1.0", Line: 1}, {Name: "0.1.0", Line: 1}, {Name: "v0.1.0-rc.1", Line: 2}, {Name: "v0.2.0", Line: 3}, {Name: "v0.1.1", Line: 4}}
	want := []string{
		"f:3: tether v0.2.0, but CHANGELOG.md's first section is v0.1.0",
		"f:4: tether v0.1.1, but CHANGELOG.md's first section is v0.1.0",
	}
	if got := CheckVersions("f", refs, "v0.1.0"); !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// Every place the docs, manifests and examples give tether's version
// gives CHANGELOG.md's: the one source of the version (make release
// takes VERSION from the command line; hack/release-check.sh derives its
// own from the same section).
func TestVersionsAgree(t *testing.T) {
	r := root(t)
	want, err := ChangelogVersion(read(t, filepath.Join(r, "CHANGELOG.md")))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	files := append(readerFiles(t, r), "Makefile")
	files = append(files, repoFiles(t, r, []string{"deploy"}, ".tpl")...) // the library chart's image template
	for _, p := range files {
		refs := VersionRefs(read(t, filepath.Join(r, p)))
		n += len(refs)
		for _, problem := range CheckVersions(p, refs, want) {
			t.Error(problem)
		}
	}
	if n < 10 {
		t.Errorf("only %d places give tether's version: the reading is broken", n)
	}
	t.Logf("%d places give %s", n, want)
}
