package monitoring

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"unicode"
)

// runbookBase is where every alert's runbook_url points: docs/runbooks.md
// on GitHub, then the alert's section anchor.
const runbookBase = "https://github.com/tether-csi/tether/blob/main/docs/runbooks.md#"

// runbookParts are the parts every section of docs/runbooks.md has, in
// bold at the start of a paragraph.
var runbookParts = []string{"**Meaning.**", "**Confirm.**", "**Do.**", "**Don't.**"}

// anchor is the anchor GitHub gives a Markdown heading: lower case,
// spaces as hyphens, punctuation other than - and _ dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"TetherBinderNotLeading", "tetherbindernotleading"},
		{"Runbooks: tether's alerts", "runbooks-tethers-alerts"},
		{" a_b-c 2 ", "a_b-c-2"},
	} {
		if got := anchor(tc.in); got != tc.want {
			t.Errorf("anchor(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// runbookSections reads docs/runbooks.md's "## " sections: their text by
// anchor, and the heading of each.
func runbookSections(t *testing.T) (text, heading map[string]string) {
	t.Helper()
	f, err := os.Open(repoFile(t, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	text, heading = map[string]string{}, map[string]string{}
	cur := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			cur = anchor(h)
			if _, dup := heading[cur]; dup {
				t.Errorf("docs/runbooks.md: section %q twice", h)
			}
			heading[cur] = h
			continue
		}
		if cur != "" {
			text[cur] += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return text, heading
}

// TestRunbooks: every alert's runbook_url points at its own section of
// docs/runbooks.md, each section has its four parts and names `kubectl
// tether`, and every section is an alert's.
func TestRunbooks(t *testing.T) {
	text, heading := runbookSections(t)
	alerts := map[string]bool{}
	for _, rs := range ruleSets {
		var rf ruleFile
		readYAML(t, repoFile(t, rs.rules), &rf)
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				alerts[anchor(r.Alert)] = true
				url, ok := r.Annotations["runbook_url"]
				if !ok {
					t.Errorf("%s: alert %s has no runbook_url", rs.rules, r.Alert)
					continue
				}
				if want := runbookBase + anchor(r.Alert); url != want {
					t.Errorf("%s: alert %s: runbook_url %s, want %s", rs.rules, r.Alert, url, want)
				}
				a := url[strings.LastIndex(url, "#")+1:]
				if heading[a] != r.Alert {
					t.Errorf("%s: alert %s: runbook_url's anchor #%s has no section \"## %s\" in docs/runbooks.md", rs.rules, r.Alert, a, r.Alert)
				}
			}
		}
	}
	for a, h := range heading {
		if !alerts[a] {
			t.Errorf("docs/runbooks.md: section %q is no alert's", h)
			continue
		}
		for _, p := range append(runbookParts, "`kubectl tether why") {
			if !strings.Contains(text[a], p) {
				t.Errorf("docs/runbooks.md: section %q has no %s", h, p)
			}
		}
	}
}
