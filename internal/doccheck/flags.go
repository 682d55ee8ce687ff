package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"

	"github.com/tether-csi/tether/internal/flagdoc"
)

// flagRegistration is the argument that names the flag, for each method
// of a flag.FlagSet (and of package flag) that registers one, and of a
// pflag.FlagSet that registers one with a shorthand (the next argument).
var flagRegistration = map[string]int{
	"String": 0, "Bool": 0, "Int": 0, "Int64": 0, "Uint": 0, "Uint64": 0, "Float64": 0, "Duration": 0,
	"Func": 0, "BoolFunc": 0,
	"StringVar": 1, "BoolVar": 1, "IntVar": 1, "Int64Var": 1, "UintVar": 1, "Uint64Var": 1,
	"Float64Var": 1, "DurationVar": 1, "Var": 1, "TextVar": 1,
	"StringP": 0, "BoolP": 0, "StringVarP": 1, "BoolVarP": 1, "IntVarP": 1, "DurationVarP": 1,
}

// CodeFlags returns the names of the flags the Go files register: the
// name of every call of a registering method (fs.StringVar(&x, "name",
// ...)) that is a string literal, the strings of a []string literal a
// loop registers a flag by each of, and the strings of a composite literal
// whose type's name ends in FlagNames (names handed to an AddFlags).
func CodeFlags(files []string) (map[string]bool, error) {
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.RangeStmt:
				addRangeNames(names, n)
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				i, ok := flagRegistration[sel.Sel.Name]
				if !ok {
					return true
				}
				if strings.HasSuffix(sel.Sel.Name, "P") {
					i++ // and the shorthand, next
					if i < len(n.Args) {
						if v, ok := stringLit(n.Args[i-1]); ok && v != "" {
							names[v] = true
						}
					}
				}
				if i < len(n.Args) {
					if v, ok := stringLit(n.Args[i]); ok && v != "" {
						names[v] = true
					}
				}
			case *ast.CompositeLit:
				if !strings.HasSuffix(typeName(n.Type), "FlagNames") {
					return true
				}
				ast.Inspect(n, func(m ast.Node) bool {
					if v, ok := stringLit(exprOf(m)); ok && v != "" {
						names[v] = true
					}
					return true
				})
			}
			return true
		})
	}
	return names, nil
}

// addRangeNames adds the strings of a range over a []string literal
// whose loop variable names the flags its body registers:
// for _, n := range []string{"n", "namespace"} { fs.StringVar(&x, n, ...) }.
func addRangeNames(names map[string]bool, r *ast.RangeStmt) {
	lit, ok := r.X.(*ast.CompositeLit)
	v, ok2 := r.Value.(*ast.Ident)
	if !ok || !ok2 {
		return
	}
	registers := false
	ast.Inspect(r.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if i, ok := flagRegistration[sel.Sel.Name]; ok && i < len(call.Args) {
			if id, ok := call.Args[i].(*ast.Ident); ok && id.Name == v.Name {
				registers = true
			}
		}
		return true
	})
	if !registers {
		return
	}
	for _, e := range lit.Elts {
		if s, ok := stringLit(e); ok && s != "" {
			names[s] = true
		}
	}
}

func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// CheckFlagNames returns a problem, "path:line: ...", for each flag md
// names in a code span that is neither one of known (tether's programs')
// nor a key of foreign (another program's flag, with its program).
func CheckFlagNames(path, md string, known map[string]bool, foreign map[string]string) []string {
	var problems []string
	for _, m := range flagdoc.Mentions(md) {
		if known[m.Name] {
			continue
		}
		if _, ok := foreign[m.Name]; ok {
			continue
		}
		problems = append(problems, fmt.Sprintf("%s:%d: --%s is a flag of no tether program (nor of another program the docs name: foreignFlags)", path, m.Line, m.Name))
	}
	return problems
}
