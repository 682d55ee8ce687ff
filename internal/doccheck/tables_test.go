package doccheck

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestCheckTables(t *testing.T) {
	for _, tc := range []struct {
		name, md string
		want     []string
	}{
		{"a good table", "x\n\n| a | b |\n|---|:-:|\n| 1 | 2 |\n| `x\\|y` | 3 |\n\nprose\n", nil},
		{"a table then a heading", "| a | b |\n|---|---|\n| 1 | 2 |\n## h\n", nil},
		{"a table then a list", "| a | b |\n|---|---|\n| 1 | 2 |\n- item\n", nil},
		{"a row of three under two", "| a | b |\n|---|---|\n| 1 | 2 | 3 |\n", []string{"d.md:3: a table row of 3 cells under a header of 2"}},
		{"an unescaped pipe in code", "| a | b |\n|---|---|\n| `x|y` | 2 |\n", []string{"d.md:3: a table row of 3 cells under a header of 2"}},
		{"a row of one", "| a | b |\n|---|---|\n| 1 |\n", []string{"d.md:3: a table row of 1 cells under a header of 2"}},
		{"prose inside", "| a | b |\n|---|---|\n| 1 | 2 |\nA sentence.\n| 3 | 4 |\n", []string{"d.md:4: a line of prose inside a table (it renders as a row): put a blank line before it"}},
		{"rows after a blank line", "| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n| 5 | 6 |\n", []string{
			"d.md:5: a table row with no header and delimiter row above it: it renders as text",
			"d.md:6: a table row with no header and delimiter row above it: it renders as text"}},
		{"a bad delimiter", "| a | b |\n|---|\n| 1 | 2 |\n", []string{
			"d.md:1: a header of 2 cells over a delimiter row of 1: it does not render as a table",
			"d.md:3: a table row with no header and delimiter row above it: it renders as text"}},
		{"a fence ends a table", "| a | b |\n|---|---|\n```\n| not | a | row |\n```\n| 1 | 2 |\n", []string{
			"d.md:6: a table row with no header and delimiter row above it: it renders as text"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckTables("d.md", tc.md); !slices.Equal(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// Every Markdown table of the README, the CHANGELOG, docs/*.md and the
// Markdown under deploy/ and examples/ renders as written.
func TestTablesRender(t *testing.T) {
	r := root(t)
	for _, p := range markdownFiles(t, r) {
		for _, problem := range CheckTables(p, read(t, filepath.Join(r, p))) {
			t.Error(problem)
		}
	}
}
