package doccheck

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestMatrixDocs(t *testing.T) {
	r := root(t)
	matrix, err := MatrixVersions(read(t, filepath.Join(r, "hack", "tools", "versions.env")))
	if err != nil {
		t.Fatal(err)
	}
	env := read(t, filepath.Join(r, "hack", "tools", "versions.env"))
	pinned := regexp.MustCompile(`(?m)^KUBERNETES_VERSION=(\S+)$`).FindStringSubmatch(env)
	if pinned == nil {
		t.Fatal("versions.env: no KUBERNETES_VERSION")
	}
	for _, p := range CheckMatrix(read(t, filepath.Join(r, "README.md")), read(t, filepath.Join(r, "docs", "testing.md")), matrix, pinned[1]) {
		t.Error(p)
	}
}

func TestCheckMatrixFails(t *testing.T) {
	matrix := []string{"v1.35.4", "v1.36.3", "v1.37.2"}
	testing := "| v1.37.2 (v1.37.2) | node | pass | 1 | 0 | 1m |\n" +
		"| v1.35.4 (v1.35.4) | diff | **FAIL** | 0 | 1 | 1m |\n" +
		"| v1.38.0-beta.0 (v1.38.0-beta.0) | diff | **FAIL** (not blocking) | 0 | 1 | 1m |\n" +
		"| v1.34.2 (v1.34.2) | diff | pass | 1 | 0 | 1m |\n"
	if got := CheckMatrix("| Kubernetes | v1.36.3 and v1.37.2 | x |\n", testing, matrix, "v1.36.3"); !slices.Equal(got, []string{
		"docs/testing.md:2: v1.35.4 did not pass",
		"docs/testing.md:4: v1.34.2 is not in KUBE_MATRIX",
	}) {
		t.Errorf("got %q", got)
	}
	if got := CheckMatrix("| Kubernetes | v1.35.4, v1.36.3, v1.37.2 | x |\n", testing, matrix, "v1.36.3"); len(got) != 3 ||
		got[2] != "README.md:1: tested Kubernetes [v1.35.4 v1.36.3 v1.37.2], but docs/testing.md's matrix table and make test ran [v1.36.3 v1.37.2]" {
		t.Errorf("a README that claims more: %q", got)
	}
	if got := CheckMatrix("", "", matrix, "v1.36.3"); len(got) != 1 || !strings.Contains(got[0], "no \"| Kubernetes |\" row") {
		t.Errorf("empty docs: %q", got)
	}
	if _, err := MatrixVersions("KUBERNETES_VERSION=v1.36.3\n"); err == nil {
		t.Error("no KUBE_MATRIX: no error")
	}
}
