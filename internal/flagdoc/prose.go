package flagdoc

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A Mention is a flag named in prose: a code span that is the flag
// (`--name`, `-name`) or the flag with a value (`--name=value`), and the
// default the text gives right after it, if any: "(default 5m)", "(its
// default, 100)", "(5m by default)".
type Mention struct {
	Line     int
	Name     string // without dashes
	Value    string // after the =
	HasValue bool
	Default  string // "" when the text gives none
}

var (
	mentionSpan = regexp.MustCompile("`(-{1,2})([a-zA-Z0-9][a-zA-Z0-9_-]*)(=[^`]*)?`")
	defaultText = regexp.MustCompile(`^\s*\((?:default|its default,)\s+([^),;]+)|^\s*\(([^),;]+?) by default\b`)
)

// Mentions returns the flags doc names in code spans outside fenced code
// blocks, in order.
func Mentions(doc string) []Mention {
	var out []Mention
	fence := ""
	for i, line := range strings.Split(doc, "\n") {
		t := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = t[:3]
			continue
		}
		for _, loc := range mentionSpan.FindAllStringSubmatchIndex(line, -1) {
			m := Mention{Line: i + 1, Name: line[loc[4]:loc[5]]}
			if loc[6] >= 0 {
				m.Value, m.HasValue = line[loc[6]+1:loc[7]], true
			}
			if d := defaultText.FindStringSubmatch(line[loc[1]:]); d != nil {
				m.Default = strings.TrimSpace(d[1] + d[2])
			}
			out = append(out, m)
		}
	}
	return out
}

// placeholder says whether a value in prose stands for values rather
// than being one: <name>, $(VAR), ..., or a choice (a|b).
func placeholder(v string) bool {
	return strings.ContainsAny(v, "<>$|") || strings.Contains(v, "...") || strings.Contains(v, "…")
}

// CheckMentions returns what the mentions of fs's flags get wrong, each
// as "line N: ...": a value the flag does not take (fs's own parser
// judges it: fs.Set, so give CheckMentions a flag set of its own, whose
// values it changes and whose defaults it keeps), and a default that is not the
// flag's (by Match's rules). A mention of a flag fs does not have is left
// out: it is another program's.
func CheckMentions(fs *flag.FlagSet, ms []Mention) []string {
	var problems []string
	for _, m := range ms {
		f := fs.Lookup(m.Name)
		if f == nil {
			continue
		}
		if m.HasValue && !placeholder(m.Value) {
			if err := fs.Set(m.Name, m.Value); err != nil {
				problems = append(problems, fmt.Sprintf("line %d: --%s=%s: %v", m.Line, m.Name, m.Value, err))
			}
		}
		if m.Default != "" {
			if err := Match(f, m.Default); err != nil {
				problems = append(problems, fmt.Sprintf("line %d: --%s: %v", m.Line, m.Name, err))
			}
		}
	}
	return problems
}

// CheckProse fails t for every problem CheckMentions finds in the README
// and docs/*.md under root, but for the documents in others (another
// program's pages, where its flags of the same name are meant), each
// with a flag set newFS returns.
func CheckProse(t *testing.T, newFS func() *flag.FlagSet, root string, others ...string) {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md under %s (%v)", root, err)
	}
	checked := 0
	for _, p := range append([]string{filepath.Join(root, "README.md")}, pages...) {
		rel, _ := filepath.Rel(root, p)
		if slices.Contains(others, filepath.ToSlash(rel)) {
			continue
		}
		doc, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fs := newFS()
		for _, m := range Mentions(string(doc)) {
			if fs.Lookup(m.Name) != nil {
				checked++
			}
		}
		for _, problem := range CheckMentions(fs, Mentions(string(doc))) {
			t.Errorf("%s: %s", rel, problem)
		}
	}
	if checked == 0 {
		t.Errorf("no document names a flag of %s: the reading is broken", newFS().Name())
	}
}
