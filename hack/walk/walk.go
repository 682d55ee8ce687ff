package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Stop is one run of calls into one file.
type Stop struct {
	File   string   // relative to the module's root
	Funcs  []string // the functions read there, in order
	Return bool     // the file was opened before
}

// Result is a walk.
type Result struct {
	Trunk string // the walked function's file
	Stops []Stop
}

// Files is the number of files opened.
func (r Result) Files() int {
	seen := map[string]bool{}
	for _, s := range r.Stops {
		seen[s.File] = true
	}
	return len(seen)
}

// Returns is the number of stops in a file opened before.
func (r Result) Returns() int {
	n := 0
	for _, s := range r.Stops {
		if s.Return {
			n++
		}
	}
	return n
}

func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "from %s\n", r.Trunk)
	for i, s := range r.Stops {
		mark := ""
		if s.Return {
			mark = " (return)"
		}
		fmt.Fprintf(&b, "%2d. %s%s: %s\n", i+1, s.File, mark, strings.Join(s.Funcs, ", "))
	}
	fmt.Fprintf(&b, "walk: %d stops in %d files, %d returns\n", len(r.Stops), r.Files(), r.Returns())
	return b.String()
}

// listed is what Walk reads of a package from go list.
type listed struct {
	ImportPath, Dir, Export string
	GoFiles                 []string
	Mod                     *struct{ Path, Dir string } `json:"Module"`
}

// Walk walks fn ("Func" or "Type.Method") of the package in dir.
func Walk(dir, fn string) (Result, error) {
	pkgs, err := goList(dir)
	if err != nil {
		return Result{}, err
	}
	target := pkgs[len(pkgs)-1] // go list -deps lists the package last
	if target.Mod == nil {
		return Result{}, errors.New(dir + " is not in a module")
	}
	exports := map[string]string{}
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range target.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(target.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return Result{}, err
		}
		files = append(files, f)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}, Defs: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	if _, err := conf.Check(target.ImportPath, fset, files, info); err != nil {
		return Result{}, err
	}
	w := &walker{fset: fset, info: info, root: target.Mod.Dir, module: target.Mod.Path + "/", decls: map[types.Object]*ast.FuncDecl{}, read: map[string]bool{}}
	var start *ast.FuncDecl
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				w.decls[info.Defs[fd.Name]] = fd
				if declName(fd) == fn {
					start = fd
				}
			}
		}
	}
	if start == nil {
		return Result{}, fmt.Errorf("no function %s in %s", fn, dir)
	}
	w.trunk = w.rel(fset.Position(start.Pos()).Filename)
	w.read[w.key(info.Defs[start.Name])] = true
	w.body(start.Body)
	return Result{Trunk: w.trunk, Stops: w.stops}, nil
}

func goList(dir string) ([]listed, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,Module", dir)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list %s: %v: %s", dir, err, stderr.String())
	}
	var pkgs []listed
	for dec := json.NewDecoder(&out); dec.More(); {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		return nil, errors.New("go list: no package")
	}
	return pkgs, nil
}

// declName is "Func" or "Type.Method".
func declName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

type walker struct {
	fset         *token.FileSet
	info         *types.Info
	root, module string
	trunk        string
	decls        map[types.Object]*ast.FuncDecl
	read         map[string]bool // functions read, by key
	stops        []Stop
}

func (w *walker) rel(path string) string {
	if r, err := filepath.Rel(w.root, path); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return path
}

// key names a function: its package, receiver and name.
func (w *walker) key(obj types.Object) string {
	if f, ok := obj.(*types.Func); ok {
		return f.Origin().FullName()
	}
	return obj.String()
}

// body walks the calls of a function body in the order they run: a
// call's receiver and arguments before the call itself.
func (w *walker) body(b ast.Node) {
	ast.Inspect(b, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		w.body(call.Fun)
		for _, a := range call.Args {
			w.body(a)
		}
		w.call(call)
		return false
	})
}

func (w *walker) call(call *ast.CallExpr) {
	var obj types.Object
	switch fun := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		if sel, ok := w.info.Selections[fun]; ok {
			obj = sel.Obj()
		} else {
			obj = w.info.Uses[fun.Sel]
		}
	case *ast.Ident:
		obj = w.info.Uses[fun]
	case *ast.IndexExpr: // a generic function instantiated explicitly
		if id, ok := ast.Unparen(fun.X).(*ast.Ident); ok {
			obj = w.info.Uses[id]
		}
	}
	f, ok := obj.(*types.Func)
	if !ok || f.Pkg() == nil || !strings.HasPrefix(f.Pkg().Path()+"/", w.module) {
		return
	}
	f = f.Origin()
	key := w.key(f)
	if w.read[key] {
		return
	}
	w.read[key] = true
	file := w.rel(w.fset.Position(f.Pos()).Filename)
	if file == w.trunk {
		if fd := w.decls[f]; fd != nil {
			w.body(fd.Body)
		}
		return
	}
	name := f.Name()
	if recv := f.Signature().Recv(); recv != nil {
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok {
			name = n.Obj().Name() + "." + name
		}
	} else if f.Pkg().Name() != "" {
		name = f.Pkg().Name() + "." + name
	}
	if n := len(w.stops); n > 0 && w.stops[n-1].File == file {
		w.stops[n-1].Funcs = append(w.stops[n-1].Funcs, name)
		return
	}
	opened := slices.ContainsFunc(w.stops, func(s Stop) bool { return s.File == file })
	w.stops = append(w.stops, Stop{File: file, Funcs: []string{name}, Return: opened})
}
