package doccheck

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestControllersValueWorksOnKubeadm holds every --controllers value that
// the README, docs, manifests, chart, examples and the programs' help give
// (issue 51, item 1) to the one that keeps kubeadm's two controllers on.
func TestControllersValueWorksOnKubeadm(t *testing.T) {
	r := root(t)
	files := repoFiles(t, r, []string{"README.md", "docs", "deploy", "examples", "cmd", "pkg"},
		".md", ".yaml", ".yml", ".txt", ".tpl", ".go")
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		text := read(t, filepath.Join(r, f))
		seen += len(controllersValue.FindAllString(text, -1))
		for _, p := range CheckControllers(f, text) {
			t.Error(p)
		}
	}
	if seen < 5 {
		t.Fatalf("found %d --controllers values in %d files; the check reads the wrong files", seen, len(files))
	}
}

func TestCheckControllers(t *testing.T) {
	for _, tt := range []struct {
		line string
		bad  int
	}{
		{"--controllers=" + KubeadmControllers, 0},
		{"value: \"" + KubeadmControllers + "\"", 0},
		{"--controllers=*,-persistentvolume-binder-controller", 1},
		{"`--controllers=...,-persistentvolume-binder-controller`", 1},
		{"controllers: \"*,bootstrapsigner,-persistentvolume-binder-controller\"", 1},
		{"the persistentvolume-binder-controller of KCM", 0},
		{"Controllers: []string{\"*\", \"-persistentvolume-binder-controller\"}", 0},
	} {
		if got := CheckControllers("f", tt.line); len(got) != tt.bad {
			t.Errorf("%s: %d problems %v, want %d", tt.line, len(got), got, tt.bad)
		}
	}
}
