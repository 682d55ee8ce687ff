package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var reasonWord = regexp.MustCompile("`([A-Z][A-Za-z0-9]+)`")

// DocReasons returns the event reasons a document lists: every word in
// backticks that is CamelCase (`ProvisioningFailed`) in the paragraphs
// that begin with "Events", each with its line.
func DocReasons(md string) map[string]int {
	reasons := map[string]int{}
	in := false
	for _, l := range ProseLines(md) {
		t := strings.TrimSpace(l.Text)
		switch {
		case t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "|"):
			in = false
			continue
		case strings.HasPrefix(t, "Events"):
			in = true
		}
		if !in {
			continue
		}
		for _, m := range reasonWord.FindAllStringSubmatch(t, -1) {
			if _, ok := reasons[m[1]]; !ok {
				reasons[m[1]] = l.N
			}
		}
	}
	return reasons
}

// A Source is a Go package whose events are read.
type Source struct {
	Dir string
	// Consts: the package's constants named Reason* are reasons it
	// records (the binder's convention: its decisions carry a Reason
	// constant, and Recorder.Event gets it through a field, which the
	// call alone does not show).
	Consts bool
}

// CodeReasons returns the reasons the packages record, each with where:
// the string constants named Reason* (for a Source with Consts), and the
// reason argument of every call of a method Event, Eventf or
// AnnotatedEventf (a record.EventRecorder's) that is a string literal or
// a constant of the package. A reason argument that is neither (a field,
// a parameter) is left out: a Consts package declares it as a constant.
func CodeReasons(sources []Source) (map[string]string, error) {
	reasons := map[string]string{}
	for _, src := range sources {
		fset := token.NewFileSet()
		files, err := goFiles(src.Dir)
		if err != nil {
			return nil, err
		}
		consts := map[string]string{}
		var parsed []*ast.File
		for _, f := range files {
			file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			parsed = append(parsed, file)
			for _, d := range file.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i >= len(vs.Values) {
							continue
						}
						if v, ok := stringLit(vs.Values[i]); ok {
							consts[name.Name] = v
							if src.Consts && strings.HasPrefix(name.Name, "Reason") {
								add(reasons, v, fset.Position(name.Pos()))
							}
						}
					}
				}
			}
		}
		for _, file := range parsed {
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				arg := -1
				switch sel.Sel.Name {
				case "Event", "Eventf":
					arg = 2
				case "AnnotatedEventf":
					arg = 3
				}
				if arg < 0 || len(call.Args) <= arg {
					return true
				}
				if v, ok := stringLit(call.Args[arg]); ok {
					add(reasons, v, fset.Position(call.Pos()))
				} else if id, ok := call.Args[arg].(*ast.Ident); ok {
					if v, ok := consts[id.Name]; ok {
						add(reasons, v, fset.Position(call.Pos()))
					}
				}
				return true
			})
		}
	}
	return reasons, nil
}

func add(reasons map[string]string, reason string, pos token.Position) {
	if _, ok := reasons[reason]; !ok {
		reasons[reason] = fmt.Sprintf("%s:%d", pos.Filename, pos.Line)
	}
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil
}

func goFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			files = append(files, filepath.Join(dir, n))
		}
	}
	return files, nil
}

// Deps returns the folders of the packages the command at root/cmd (e.g.
// "./cmd/binder") imports, its own included, whose import path starts
// with one of the prefixes.
func Deps(root, cmd string, prefixes ...string) ([]string, error) {
	c := exec.Command("go", "list", "-e", "-deps", "-f", "{{.ImportPath}} {{.Dir}}", cmd)
	c.Dir = root
	out, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %v", cmd, err)
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(line, " ")
		for _, p := range prefixes {
			if strings.HasPrefix(path, p) && dir != "" {
				dirs = append(dirs, dir)
				break
			}
		}
	}
	sort.Strings(dirs)
	return dirs, nil
}

// CompareReasons returns a problem for each reason the code records that
// the document does not list, and each one it lists that the code does
// not record.
func CompareReasons(doc string, listed map[string]int, recorded map[string]string) []string {
	var problems []string
	for r, where := range recorded {
		if _, ok := listed[r]; !ok {
			problems = append(problems, fmt.Sprintf("%s: the event reason %s (%s) is not in its events list", doc, r, where))
		}
	}
	for r, line := range listed {
		if _, ok := recorded[r]; !ok {
			problems = append(problems, fmt.Sprintf("%s:%d: the events list names %s, which the code never records", doc, line, r))
		}
	}
	sort.Strings(problems)
	return problems
}

// EventWords returns the words that may be event reasons in md: CamelCase
// words in backticks on a line that speaks of events (it says "event" or
// "warning", in any case) or in a paragraph that begins with "Events",
// outside fenced code blocks, each with its line.
func EventWords(md string) []Ref {
	var refs []Ref
	in := false
	for _, l := range ProseLines(md) {
		t := strings.TrimSpace(l.Text)
		switch {
		case t == "" || strings.HasPrefix(t, "#"):
			in = false
		case strings.HasPrefix(t, "Events"):
			in = true
		}
		lower := strings.ToLower(t)
		if !in && !strings.Contains(lower, "event") && !strings.Contains(lower, "warning") {
			continue
		}
		for _, m := range reasonWord.FindAllStringSubmatch(t, -1) {
			if isCamel(m[1]) {
				refs = append(refs, Ref{Name: m[1], Line: l.N})
			}
		}
	}
	return refs
}

// isCamel says whether w has a lower-case letter followed by an
// upper-case one (ProvisioningFailed; not Warning, not PVC).
func isCamel(w string) bool {
	for i := 1; i < len(w); i++ {
		if w[i-1] >= 'a' && w[i-1] <= 'z' && w[i] >= 'A' && w[i] <= 'Z' {
			return true
		}
	}
	return false
}

// CheckEventWords returns a problem, "path:line: ...", for each word of
// refs that is not a reason the code records, nor a name the code
// declares (a type, function, method, field or constant: words in
// backticks near "event" are often those), nor one of others (another
// component's reasons and names, with whose they are).
func CheckEventWords(path string, refs []Ref, reasons, declared map[string]bool, others map[string]string) []string {
	var problems []string
	for _, r := range refs {
		if _, ok := others[r.Name]; ok || reasons[r.Name] || declared[r.Name] {
			continue
		}
		problems = append(problems, fmt.Sprintf("%s:%d: %s is no event reason the code records (nor a name it declares)", path, r.Line, r.Name))
	}
	return problems
}

// DeclaredNames returns the names the Go files declare: types,
// functions, methods, constants, variables and struct fields.
func DeclaredNames(files []string) (map[string]bool, error) {
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				names[n.Name.Name] = true
			case *ast.TypeSpec:
				names[n.Name.Name] = true
			case *ast.ValueSpec:
				for _, id := range n.Names {
					names[id.Name] = true
				}
			case *ast.Field:
				for _, id := range n.Names {
					names[id.Name] = true
				}
			}
			return true
		})
	}
	return names, nil
}
