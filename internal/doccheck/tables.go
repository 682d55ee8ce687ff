package doccheck

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/tether-csi/tether/internal/flagdoc"
)

var (
	delimiterCell = regexp.MustCompile(`^:?-+:?$`)
	// blockStart is a line that ends a table by starting another block
	// (a heading, a list item, a quote, HTML).
	blockStart = regexp.MustCompile(`^(#{1,6}\s|[-*+]\s|[0-9]+[.)]\s|>|<)`)
)

// CheckTables returns where the Markdown tables of md (the document at
// path) do not render as written, each as "path:line: what": a row whose
// number of cells is not its header's (GitHub drops the extra cells and
// pads the missing ones), a line of prose right under a table's rows
// (without a blank line it renders as a row of the table), a table row
// with no header and delimiter row above it (it renders as text), and a
// delimiter row whose cells are not the header's in number (then nothing
// of it is a table). A cell ends at every | that is not escaped as \|,
// in code spans too, as GitHub reads them. Fenced code blocks are left
// out.
func CheckTables(path, md string) []string {
	var problems []string
	report := func(n int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: ", path, n)+fmt.Sprintf(format, args...))
	}
	lines := ProseLines(md)
	cols := 0 // the header's cells while in a table, else 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l.Text)
		if i > 0 && lines[i-1].N != l.N-1 {
			cols = 0 // a fenced block ended the table
		}
		if t == "" {
			cols = 0
			continue
		}
		isRow := strings.HasPrefix(t, "|")
		if cols > 0 {
			switch {
			case isRow:
				if n := len(flagdoc.Cells(t)); n != cols {
					report(l.N, "a table row of %d cells under a header of %d", n, cols)
				}
				continue
			case blockStart.MatchString(t):
				cols = 0
			default:
				report(l.N, "a line of prose inside a table (it renders as a row): put a blank line before it")
				continue
			}
		}
		if !isRow {
			continue
		}
		if i+1 < len(lines) && lines[i+1].N == l.N+1 && isDelimiterRow(lines[i+1].Text) {
			header, delim := len(flagdoc.Cells(t)), len(flagdoc.Cells(lines[i+1].Text))
			if header != delim {
				report(l.N, "a header of %d cells over a delimiter row of %d: it does not render as a table", header, delim)
				i++
				continue
			}
			cols = header
			i++
			continue
		}
		report(l.N, "a table row with no header and delimiter row above it: it renders as text")
	}
	return problems
}

func isDelimiterRow(line string) bool {
	t := strings.TrimSpace(line)
	if !strings.Contains(t, "|") || !strings.Contains(t, "-") {
		return false
	}
	for _, c := range flagdoc.Cells(t) {
		if !delimiterCell.MatchString(c) {
			return false
		}
	}
	return true
}
