package doccheck

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// RepoRoot is the folder of go.mod above the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Line is one line of a Markdown document outside fenced code blocks.
type Line struct {
	N    int // 1-based
	Text string
}

// ProseLines returns the lines of md outside fenced code blocks (``` or
// ~~~), with their numbers.
func ProseLines(md string) []Line {
	var lines []Line
	fence := ""
	for i, l := range strings.Split(md, "\n") {
		t := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = t[:3]
			continue
		}
		lines = append(lines, Line{N: i + 1, Text: l})
	}
	return lines
}

var (
	atxHeading  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	inlineLink  = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^()\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDef      = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	htmlAnchor  = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	htmlHref    = regexp.MustCompile(`\shref="([^"]+)"`)
	codeSpan    = regexp.MustCompile("`+[^`]*`+")
	emphasis    = regexp.MustCompile(`\*+|(^|\s)_+|_+(\s|$)`)
	scheme      = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	lineAnchor  = regexp.MustCompile(`^L[0-9]+(-L[0-9]+)?$`)
	setextUnder = regexp.MustCompile(`^ {0,3}(=+|-+)\s*$`)
)

// Slug is GitHub's anchor for a heading's rendered text: lower-case,
// every character but letters, digits, marks, '-' and '_' dropped, each
// space made '-'.
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingText is the text a heading renders: code spans keep their
// content, links their text, emphasis marks go.
func headingText(h string) string {
	h = inlineLink.ReplaceAllString(h, "$1")
	h = strings.ReplaceAll(h, "`", "")
	h = emphasis.ReplaceAllString(h, "$1$2")
	return strings.TrimSpace(h)
}

// Anchors returns every anchor of md: one per heading (ATX or setext),
// a repeated one suffixed -1, -2, ... as GitHub does, and the names of
// <a name=...> and <a id=...> tags.
func Anchors(md string) map[string]bool {
	anchors := map[string]bool{}
	count := map[string]int{}
	add := func(text string) {
		base := Slug(headingText(text))
		slug := base
		for anchors[slug] {
			count[base]++
			slug = base + "-" + strconv.Itoa(count[base])
		}
		anchors[slug] = true
	}
	lines := ProseLines(md)
	for i, l := range lines {
		if m := atxHeading.FindStringSubmatch(l.Text); m != nil {
			add(m[2])
		} else if i+1 < len(lines) && lines[i+1].N == l.N+1 && setextUnder.MatchString(lines[i+1].Text) &&
			strings.TrimSpace(l.Text) != "" && !strings.HasPrefix(strings.TrimSpace(l.Text), "|") &&
			(i == 0 || strings.TrimSpace(lines[i-1].Text) == "") && !strings.HasPrefix(strings.TrimSpace(l.Text), "-") {
			add(l.Text)
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l.Text, -1) {
			anchors[m[1]] = true
		}
	}
	return anchors
}

// Link is a link target in a document.
type Link struct {
	Line   int
	Target string
}

// Links returns the targets of the inline links, images, reference
// definitions and HTML hrefs of md, outside code blocks and code spans;
// a link's text may run over several lines of a paragraph.
func Links(md string) []Link {
	var links []Link
	lines := ProseLines(md)
	for start := 0; start < len(lines); {
		// A block: consecutive lines, each next to the one before.
		end := start + 1
		for end < len(lines) && lines[end].N == lines[end-1].N+1 && strings.TrimSpace(lines[end].Text) != "" {
			end++
		}
		var texts []string
		for _, l := range lines[start:end] {
			texts = append(texts, l.Text)
		}
		block := strings.Join(texts, "\n")
		block = codeSpan.ReplaceAllStringFunc(block, func(s string) string {
			return strings.Map(func(r rune) rune {
				if r == '\n' {
					return r
				}
				return ' '
			}, s)
		})
		lineOf := func(i int) int { return lines[start].N + strings.Count(block[:i], "\n") }
		for _, m := range inlineLink.FindAllStringSubmatchIndex(block, -1) {
			links = append(links, Link{lineOf(m[0]), block[m[4]:m[5]]})
		}
		for i, l := range strings.Split(block, "\n") {
			if m := refDef.FindStringSubmatch(l); m != nil {
				links = append(links, Link{lines[start].N + i, m[1]})
			}
		}
		for _, m := range htmlHref.FindAllStringSubmatchIndex(block, -1) {
			links = append(links, Link{lineOf(m[0]), block[m[2]:m[3]]})
		}
		start = end
	}
	return links
}

// CheckLinks returns every relative link of the documents (paths
// relative to root) that does not resolve: a path outside root or not
// there, an anchor no heading of the target gives, an anchor into a file
// that is not Markdown (but GitHub's line anchors, #L10).
func CheckLinks(root string, docs []string) []string {
	return checkLinks(root, docs, nil)
}

// checkLinks is CheckLinks with the documents of overlay (by their path
// relative to root) read from it instead of the disk.
func checkLinks(root string, docs []string, overlay map[string]string) []string {
	readFile := func(path string) ([]byte, error) {
		if rel, err := filepath.Rel(root, path); err == nil {
			if s, ok := overlay[rel]; ok {
				return []byte(s), nil
			}
		}
		return os.ReadFile(path)
	}
	var problems []string
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) (map[string]bool, error) {
		if a, ok := anchorsOf[path]; ok {
			return a, nil
		}
		b, err := readFile(path)
		if err != nil {
			return nil, err
		}
		anchorsOf[path] = Anchors(string(b))
		return anchorsOf[path], nil
	}
	for _, doc := range docs {
		b, err := readFile(filepath.Join(root, doc))
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, l := range Links(string(b)) {
			if l.Target == "" || scheme.MatchString(l.Target) || strings.HasPrefix(l.Target, "//") {
				continue
			}
			where := fmt.Sprintf("%s:%d: %s", doc, l.Line, l.Target)
			pathPart, anchor, _ := strings.Cut(l.Target, "#")
			if i := strings.Index(pathPart, "?"); i >= 0 {
				pathPart = pathPart[:i]
			}
			p, err := url.PathUnescape(pathPart)
			if err != nil {
				problems = append(problems, where+": "+err.Error())
				continue
			}
			target := filepath.Join(root, doc)
			if p != "" {
				if strings.HasPrefix(p, "/") {
					problems = append(problems, where+": an absolute path (GitHub reads it from the site's root): make it relative")
					continue
				}
				target = filepath.Join(filepath.Dir(filepath.Join(root, doc)), p)
				rel, err := filepath.Rel(root, target)
				if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
					problems = append(problems, where+": outside the repository")
					continue
				}
				if _, err := os.Stat(target); err != nil {
					problems = append(problems, where+": no such file or folder")
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(strings.ToLower(target), ".md") {
				if !lineAnchor.MatchString(anchor) {
					problems = append(problems, where+": an anchor into a file that is not Markdown")
				}
				continue
			}
			a, err := anchors(target)
			if err != nil {
				problems = append(problems, where+": "+err.Error())
				continue
			}
			if dec, err := url.PathUnescape(anchor); err == nil {
				anchor = dec
			}
			if !a[anchor] {
				problems = append(problems, where+": no heading has the anchor #"+anchor)
			}
		}
	}
	return problems
}
