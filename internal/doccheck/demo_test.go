package doccheck

import (
	"path/filepath"
	"testing"
)

// demoDocs are the documents that describe how long make demo takes.
var demoDocs = []string{"README.md", "docs/development.md"}

// The README and docs/development.md give make demo's times as its first
// line does.
func TestDemoFiguresAgree(t *testing.T) {
	r := root(t)
	first, later, err := DemoFigures(read(t, filepath.Join(r, "Makefile")))
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, d := range demoDocs {
		docs[d] = read(t, filepath.Join(r, d))
	}
	for _, p := range CheckDemoFigures(first, later, docs) {
		t.Error(p)
	}
}

// A figure changed in the Makefile alone, or in one document alone, is
// found; so is a first line without figures.
func TestDemoFiguresMutated(t *testing.T) {
	r := root(t)
	makefile := read(t, filepath.Join(r, "Makefile"))
	readme := read(t, filepath.Join(r, "README.md"))
	first, later, err := DemoFigures(makefile)
	if err != nil {
		t.Fatal(err)
	}
	changed := mutate(t, makefile, "later runs start in "+later, "later runs start in about 99 s")
	f2, l2, err := DemoFigures(changed)
	if err != nil {
		t.Fatal(err)
	}
	wantProblem(t, CheckDemoFigures(f2, l2, map[string]string{"README.md": readme}), `README.md does not say "about 99 s"`)
	wantProblem(t, CheckDemoFigures(first, later, map[string]string{"README.md": mutate(t, readme, "minutes on", "min. on")}),
		"README.md does not say "+`"`+first)
	if _, _, err := DemoFigures(mutate(t, makefile, "("+first+")", "")); err == nil {
		t.Error("a first line without the first run's time is taken")
	}
}
