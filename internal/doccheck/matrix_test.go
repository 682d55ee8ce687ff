package doccheck

import (
	"path/filepath"
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
	for _, p := range CheckMatrix(read(t, filepath.Join(r, "README.md")), read(t, filepath.Join(r, "docs", "testing.md")), matrix) {
		t.Error(p)
	}
}

func TestCheckMatrixFails(t *testing.T) {
	matrix := []string{"v1.35.4", "v1.36.3"}
	readme := "| Kubernetes | v1.36.3 and v1.37.2 | x |\n"
	testing := "| v1.36.3 (v1.36.3) | node | pass | 1 | 0 | 1m |\n| v1.35.4 (v1.35.4) | diff | **FAIL** | 0 | 1 | 1m |\n"
	got := CheckMatrix(readme, testing, matrix)
	want := []string{
		"README.md:1: tested Kubernetes [v1.36.3 v1.37.2], but make test-versions runs [v1.35.4 v1.36.3] (KUBE_MATRIX)",
		"docs/testing.md:2: v1.35.4 did not pass: **FAIL**",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := CheckMatrix("", "", matrix); len(got) != 3 || !strings.Contains(got[0], "no \"| Kubernetes |\" row") {
		t.Errorf("empty docs: %q", got)
	}
	if _, err := MatrixVersions("KUBERNETES_VERSION=v1.36.3\n"); err == nil {
		t.Error("no KUBE_MATRIX: no error")
	}
}
