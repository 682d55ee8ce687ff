package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// write is one write call found.
type write struct {
	file   string // slash-separated, as walked
	line   int
	kind   string // kindClaim or kindVolume
	method string
}

// writeMethods are the typed clients' methods that write.
var writeMethods = []string{"Create", "Update", "UpdateStatus", "Patch", "Apply", "ApplyStatus", "Delete", "DeleteCollection"}

// interfaceKinds are the typed clients' interface names.
var interfaceKinds = map[string]string{
	"PersistentVolumeClaimInterface": kindClaim,
	"PersistentVolumeInterface":      kindVolume,
}

// scan finds the writes of the non-test Go files under dirs, in file and
// line order.
func scan(dirs []string) ([]write, error) {
	var out []write
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() {
				if path != dir && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				return nil
			}
			ws, err := checkFile(filepath.ToSlash(path), nil)
			out = append(out, ws...)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].file != out[j].file {
			return out[i].file < out[j].file
		}
		return out[i].line < out[j].line
	})
	return out, nil
}

// checkFile finds the writes of one file; src is its text, or nil to read
// it from path.
func checkFile(path string, src any) ([]write, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	fc := &fileClients{wrappers: map[string]string{}, fields: map[string]string{}}
	fc.findWrappers(f)
	var out []write
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		vars := fc.funcVars(fn)
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !slices.Contains(writeMethods, sel.Sel.Name) {
				return true
			}
			if kind := fc.clientKind(sel.X, vars); kind != "" {
				out = append(out, write{file: path, line: fset.Position(call.Pos()).Line, kind: kind, method: sel.Sel.Name})
			}
			return true
		})
	}
	return out, nil
}

// fileClients is what one file declares that holds a typed client.
type fileClients struct {
	// wrappers are the struct types of the file that embed a typed
	// client, with its kind.
	wrappers map[string]string
	// fields are the named struct fields of the file declared with a
	// typed client's type (or a wrapper's), with its kind.
	fields map[string]string
}

// findWrappers fills wrappers, then fields.
func (fc *fileClients) findWrappers(f *ast.File) {
	var structs []*ast.StructType
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok {
			if st, ok := ts.Type.(*ast.StructType); ok {
				for _, field := range st.Fields.List {
					if len(field.Names) == 0 {
						if kind := fc.typeKind(field.Type); kind != "" {
							fc.wrappers[ts.Name.Name] = kind
						}
					}
				}
			}
		}
		if st, ok := n.(*ast.StructType); ok {
			structs = append(structs, st)
		}
		return true
	})
	for _, st := range structs {
		for _, field := range st.Fields.List {
			if kind := fc.typeKind(field.Type); kind != "" {
				for _, name := range field.Names {
					fc.fields[name.Name] = kind
				}
			}
		}
	}
}

// typeKind is the kind of client a type expression names, "" for none.
func (fc *fileClients) typeKind(t ast.Expr) string {
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	var name string
	switch t := t.(type) {
	case *ast.Ident:
		name = t.Name
	case *ast.SelectorExpr:
		name = t.Sel.Name
	default:
		return ""
	}
	if kind, ok := interfaceKinds[name]; ok {
		return kind
	}
	return fc.wrappers[name]
}

// funcVars are the names of fn (its receiver, parameters and results, and
// the variables of its body and of the function literals in it) that hold
// a typed client, with its kind.
func (fc *fileClients) funcVars(fn *ast.FuncDecl) map[string]string {
	vars := map[string]string{}
	declare := func(fields *ast.FieldList) {
		if fields == nil {
			return
		}
		for _, field := range fields.List {
			if kind := fc.typeKind(field.Type); kind != "" {
				for _, name := range field.Names {
					vars[name.Name] = kind
				}
			}
		}
	}
	declare(fn.Recv)
	declare(fn.Type.Params)
	declare(fn.Type.Results)
	// A variable assigned from another is found once that one is:
	// repeat until nothing is added.
	for {
		before := len(vars)
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				declare(n.Type.Params)
				declare(n.Type.Results)
			case *ast.AssignStmt:
				if len(n.Lhs) == len(n.Rhs) {
					for i, lhs := range n.Lhs {
						if id, ok := lhs.(*ast.Ident); ok && id.Name != "_" {
							if kind := fc.clientKind(n.Rhs[i], vars); kind != "" {
								vars[id.Name] = kind
							}
						}
					}
				}
			case *ast.ValueSpec:
				kind := ""
				if n.Type != nil {
					kind = fc.typeKind(n.Type)
				}
				for i, name := range n.Names {
					k := kind
					if k == "" && len(n.Values) == len(n.Names) {
						k = fc.clientKind(n.Values[i], vars)
					}
					if k != "" && name.Name != "_" {
						vars[name.Name] = k
					}
				}
			}
			return true
		})
		if len(vars) == before {
			return vars
		}
	}
}

// clientKind is the kind of typed client an expression evaluates to, ""
// for none (or none this check can see).
func (fc *fileClients) clientKind(e ast.Expr, vars map[string]string) string {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return fc.clientKind(e.X, vars)
	case *ast.Ident:
		return vars[e.Name]
	case *ast.SelectorExpr:
		if kind, ok := interfaceKinds[e.Sel.Name]; ok {
			return kind // an embedded client, named
		}
		return fc.fields[e.Sel.Name]
	case *ast.CompositeLit:
		if e.Type != nil {
			return fc.typeKind(e.Type)
		}
	case *ast.UnaryExpr:
		if e.Op == token.AND {
			return fc.clientKind(e.X, vars)
		}
	case *ast.CallExpr:
		sel, ok := e.Fun.(*ast.SelectorExpr)
		if !ok {
			return ""
		}
		switch {
		case sel.Sel.Name == "PersistentVolumeClaims" && len(e.Args) == 1:
			return kindClaim
		case sel.Sel.Name == "PersistentVolumes" && len(e.Args) == 0:
			return kindVolume
		}
	}
	return ""
}
