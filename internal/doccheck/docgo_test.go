package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasDocGo: every package of cmd, pkg and internal keeps
// its package comment, with the map of its files, in a doc.go, and no
// other file of it has a package comment.
func TestEveryPackageHasDocGo(t *testing.T) {
	r := root(t)
	pkgs := map[string][]string{} // directory: its non-test Go files
	for _, f := range repoFiles(t, r, []string{"cmd", "pkg", "internal"}, ".go") {
		if !strings.HasSuffix(f, "_test.go") {
			pkgs[filepath.Dir(f)] = append(pkgs[filepath.Dir(f)], f)
		}
	}
	for dir, files := range pkgs {
		var commented []string
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(r, f))
			if err != nil {
				t.Fatal(err)
			}
			if hasPackageComment(string(data)) {
				commented = append(commented, filepath.Base(f))
			}
		}
		if len(commented) != 1 || commented[0] != "doc.go" {
			t.Errorf("%s: package comment in %v, want in doc.go alone", dir, commented)
		}
	}
}

// hasPackageComment says whether a Go file's package clause has a comment
// directly above it (a build constraint is not one).
func hasPackageComment(src string) bool {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "package ") {
			return i > 0 && strings.HasPrefix(lines[i-1], "//") && !strings.HasPrefix(lines[i-1], "//go:build")
		}
	}
	return false
}
