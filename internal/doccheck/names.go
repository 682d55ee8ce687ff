package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
)

// annotationName is an annotation, label, finalizer or taint key in code
// spans: a prefix under kubernetes.io with a subdomain of its own
// (pv.kubernetes.io/bind-completed), or under tether.dev
// (tether.dev/owner, provisioner.tether.dev/volume-in-flight); a value
// after = or : is not part of it.
var annotationName = regexp.MustCompile(`^((?:[a-z0-9-]+\.)+kubernetes\.io|(?:[a-z0-9-]+\.)*tether\.dev)/([A-Za-z0-9][A-Za-z0-9._-]*)(\*?)(?:[=:].*)?$`)

var codeSpanText = regexp.MustCompile("`([^`]+)`")

// DocAnnotations returns the annotation names (and label, finalizer and
// taint keys) md names in code spans, outside fenced code blocks, with
// their lines; a name ending in * is a prefix.
func DocAnnotations(md string) []Ref {
	var refs []Ref
	for _, l := range ProseLines(md) {
		for _, m := range codeSpanText.FindAllStringSubmatch(l.Text, -1) {
			a := annotationName.FindStringSubmatch(strings.TrimSpace(m[1]))
			if a == nil {
				continue
			}
			refs = append(refs, Ref{Name: a[1] + "/" + a[2], Line: l.N, Prefix: a[3] == "*"})
		}
	}
	return refs
}

// CodeStrings returns the string constants of the Go files, and, with
// literals, every string literal of them too.
func CodeStrings(files []string, literals bool) (map[string]bool, error) {
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if literals {
			ast.Inspect(file, func(n ast.Node) bool {
				if v, ok := stringLit(exprOf(n)); ok {
					out[v] = true
				}
				return true
			})
			continue
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				for _, v := range s.(*ast.ValueSpec).Values {
					if v, ok := stringLit(v); ok {
						out[v] = true
					}
				}
			}
		}
	}
	return out, nil
}

// CheckAnnotations returns a problem, "path:line: ...", for each name in
// refs that is not a string of the code (for a prefix: that no string
// begins with).
func CheckAnnotations(path string, refs []Ref, code map[string]bool) []string {
	var problems []string
	for _, r := range refs {
		known := code[r.Name]
		if r.Prefix {
			for s := range code {
				if strings.HasPrefix(s, r.Name) {
					known = true
					break
				}
			}
		}
		if !known {
			problems = append(problems, fmt.Sprintf("%s:%d: %s is in no constant of the code: a name it does not use, or misspelt", path, r.Line, r.Name))
		}
	}
	return problems
}
