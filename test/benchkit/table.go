package benchkit

import (
	"fmt"
	"strings"
)

// Columns is a report table with a column per row R (a stack, a contender)
// and a line per figure: the benches print their runs side by side.
type Columns[R any] struct {
	rows  []R
	lines [][]string
}

// NewColumns starts a table whose header is "figure" and each row's label.
func NewColumns[R any](rows []R, label func(R) string) *Columns[R] {
	head := []string{"figure"}
	for _, r := range rows {
		head = append(head, label(r))
	}
	return &Columns[R]{rows: rows, lines: [][]string{head}}
}

// Add adds a figure's line: its name, then cell of each row.
func (c *Columns[R]) Add(name string, cell func(R) string) {
	line := []string{name}
	for _, r := range c.rows {
		line = append(line, cell(r))
	}
	c.lines = append(c.lines, line)
}

// Markdown is the table as a Markdown table.
func (c *Columns[R]) Markdown() string {
	var b strings.Builder
	for i, l := range c.lines {
		b.WriteString("| " + strings.Join(l, " | ") + " |\n")
		if i == 0 {
			b.WriteString("|" + strings.Repeat("---|", len(l)) + "\n")
		}
	}
	return b.String()
}

// Aligned is the table as plain text, each column padded to its widest
// cell and followed by two spaces.
func (c *Columns[R]) Aligned() string {
	widths := make([]int, len(c.lines[0]))
	for _, l := range c.lines {
		for i, cell := range l {
			widths[i] = max(widths[i], len(cell))
		}
	}
	var b strings.Builder
	for _, l := range c.lines {
		for i, cell := range l {
			fmt.Fprintf(&b, "%-*s  ", widths[i], cell)
		}
		b.WriteString("\n")
	}
	return b.String()
}
