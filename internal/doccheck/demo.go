package doccheck

import (
	"fmt"
	"regexp"
	"strings"
)

// The figures of make demo's first line, the Makefile's `@echo "make demo:
// ..."`: how long the first run takes, "(10 to 15 minutes on 2 cores)", and
// how soon a later run starts, "later runs start in about 45 s".
var (
	demoLine   = regexp.MustCompile(`(?m)^\t@echo "make demo: (.*)"$`)
	demoFirst  = regexp.MustCompile(`\(([^()]* minutes on 2 cores)\)`)
	demoLater  = regexp.MustCompile(`later runs start in (about \d+ s)`)
	whitespace = regexp.MustCompile(`\s+`)
)

// DemoFigures returns the two figures of make demo's first line in the
// Makefile's text, or an error when the line or a figure is not there.
func DemoFigures(makefile string) (first, later string, err error) {
	m := demoLine.FindStringSubmatch(makefile)
	if m == nil {
		return "", "", fmt.Errorf(`the Makefile has no recipe line @echo "make demo: ..."`)
	}
	f, l := demoFirst.FindStringSubmatch(m[1]), demoLater.FindStringSubmatch(m[1])
	if f == nil || l == nil {
		return "", "", fmt.Errorf("make demo's first line in the Makefile does not say how long its first run takes (\"(N minutes on 2 cores)\") and how soon later runs start (\"later runs start in about N s\"): %q", m[1])
	}
	return f[1], l[1], nil
}

// CheckDemoFigures reports each document (name to text) that does not
// state both figures as the Makefile does; line breaks inside a figure do
// not count.
func CheckDemoFigures(first, later string, docs map[string]string) []string {
	var problems []string
	for name, text := range docs {
		flat := whitespace.ReplaceAllString(text, " ")
		for _, fig := range []string{first, later} {
			if !strings.Contains(flat, fig) {
				problems = append(problems, fmt.Sprintf("%s does not say %q, as make demo's first line does", name, fig))
			}
		}
	}
	return problems
}
