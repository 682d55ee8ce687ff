package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Gremlins v0.6.0 misjudges two kinds of mutant, and make mutate judges
// them itself, in its own copies of the module:
//   - It takes the conditions of a switch's cases, and package-level
//     constants, for not covered: the cover profile's blocks leave them out.
//     Such a mutant is run when its switch statement was reached by the
//     package's tests (a constant always is).
//   - It counts a mutant that does not compile as killed: go test exits 1
//     on a build failure as on a failing test. Only ARITHMETIC_BASE can
//     fail to compile (+ to - on strings); each one gremlins counts killed
//     is built, and counts nowhere (NOT VIABLE) if it does not.

// block is a span of a cover profile and whether the tests ran it.
type block struct {
	startLine, startCol, endLine, endCol int
	ran                                  bool
}

// parseProfile reads a cover profile's blocks of the files under prefix
// (the package's import path and a slash), keyed by file name.
func parseProfile(data []byte, prefix string) (map[string][]block, error) {
	out := map[string][]block{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "mode:") || !strings.HasPrefix(line, prefix) {
			continue
		}
		var file string
		var b block
		var stmts, count int
		colon := strings.LastIndex(line, ":")
		if colon < 0 {
			return nil, fmt.Errorf("cover profile line %q", line)
		}
		file = line[len(prefix):colon]
		if _, err := fmt.Sscanf(line[colon+1:], "%d.%d,%d.%d %d %d", &b.startLine, &b.startCol, &b.endLine, &b.endCol, &stmts, &count); err != nil {
			return nil, fmt.Errorf("cover profile line %q: %w", line, err)
		}
		b.ran = count > 0
		out[file] = append(out[file], b)
	}
	return out, sc.Err()
}

// ran reports whether a block the tests ran holds the position.
func ran(blocks []block, line, col int) bool {
	for _, b := range blocks {
		after := line > b.startLine || line == b.startLine && col >= b.startCol
		before := line < b.endLine || line == b.endLine && col <= b.endCol
		if b.ran && after && before {
			return true
		}
	}
	return false
}

// reached reports whether a mutant gremlins took for not covered is in a
// case condition of a switch the tests reached, or in a package-level
// constant.
func reached(src []byte, blocks []block, line, col int) (bool, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, 0)
	if err != nil {
		return false, err
	}
	within := func(n ast.Node) bool {
		s, e := fset.Position(n.Pos()), fset.Position(n.End())
		return (line > s.Line || line == s.Line && col >= s.Column) && (line < e.Line || line == e.Line && col < e.Column)
	}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST && within(g) {
			return true, nil
		}
	}
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		sw, ok := n.(*ast.SwitchStmt)
		if !ok || found || !within(sw) {
			return !found
		}
		for _, c := range sw.Body.List {
			for _, e := range c.(*ast.CaseClause).List {
				if within(e) {
					p := fset.Position(sw.Pos())
					found = ran(blocks, p.Line, p.Column)
					return false
				}
			}
		}
		return true
	})
	return found, nil
}

// mutations is what each kind of mutant turns a token into.
var mutations = map[string]map[token.Token]token.Token{
	"CONDITIONALS_NEGATION": {token.EQL: token.NEQ, token.NEQ: token.EQL, token.LSS: token.GEQ, token.GEQ: token.LSS, token.GTR: token.LEQ, token.LEQ: token.GTR},
	"CONDITIONALS_BOUNDARY": {token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ, token.GEQ: token.GTR},
	"ARITHMETIC_BASE":       {token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO, token.QUO: token.MUL, token.REM: token.MUL},
	"INCREMENT_DECREMENT":   {token.INC: token.DEC, token.DEC: token.INC},
	"INVERT_NEGATIVES":      {token.SUB: token.ADD},
}

// mutate is src with the mutation of kind applied to the token at line
// and col.
func mutate(src []byte, line, col int, kind string) ([]byte, error) {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, 0)
	for {
		pos, tok, _ := s.Scan()
		if tok == token.EOF {
			return nil, fmt.Errorf("no token at %d:%d", line, col)
		}
		p := fset.Position(pos)
		if p.Line != line || p.Column != col {
			continue
		}
		to, ok := mutations[kind][tok]
		if !ok {
			return nil, fmt.Errorf("%s does not mutate %s at %d:%d", kind, tok, line, col)
		}
		off := file.Offset(pos)
		out := append([]byte{}, src[:off]...)
		out = append(out, to.String()...)
		return append(out, src[off+len(tok.String()):]...), nil
	}
}

// needsOwnRun is whether make mutate runs a mutant itself (see above).
func needsOwnRun(m mutant, src []byte, blocks []block) (bool, error) {
	switch {
	case m.Status == notCovered:
		return reached(src, blocks, m.Line, m.Column)
	case (m.Status == killed || m.Status == timedOut) && m.Kind == "ARITHMETIC_BASE":
		return true, nil
	}
	return false, nil
}

// ownRunFloor is the least time a mutant's own run is given: the cover
// run that times it reuses the build gremlins' cover run left in the
// cache, while each mutant rebuilds the package and links its tests with
// the simulator (on 2 busy cores, over a minute).
const ownRunFloor = 10 * time.Minute

// ownTimeout is how long a mutant's tests may run in make mutate's own
// run: coefficient times the package's cover run, and at least
// ownRunFloor.
func ownTimeout(coefficient int, cover time.Duration) time.Duration {
	return max(ownRunFloor, time.Duration(coefficient)*cover)
}

// recheck runs, in workers copies of the module at src, the mutants of t
// that gremlins misjudges, and returns ms with their statuses made right.
// A mutant's tests time out after ownTimeout.
func recheck(src string, t target, ms []mutant, workers, coefficient int) ([]mutant, error) {
	modPath, err := modulePath(src)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "tether-mutate-cover-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	profile := filepath.Join(tmp, "cover.out")
	start := time.Now()
	cover := exec.Command("go", "test", "-tags", "mutate", "-count=1", "-coverprofile", profile, "./"+t.Dir)
	cover.Dir = src
	if out, err := cover.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("the tests of %s fail without a mutant: %w\n%s", t.Dir, err, out)
	}
	timeout := ownTimeout(coefficient, time.Since(start))
	data, err := os.ReadFile(profile)
	if err != nil {
		return nil, err
	}
	blocks, err := parseProfile(data, modPath+"/"+t.Dir+"/")
	if err != nil {
		return nil, err
	}
	var todo []int
	for i, m := range ms {
		rel := strings.TrimPrefix(m.File, t.Dir+"/")
		code, err := os.ReadFile(filepath.Join(src, m.File))
		if err != nil {
			return nil, err
		}
		own, err := needsOwnRun(m, code, blocks[rel])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m, err)
		}
		if own {
			todo = append(todo, i)
		}
	}
	out := append([]mutant{}, ms...)
	jobs := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		dir, err := os.MkdirTemp("", "tether-mutate-own-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				status, err := runOwn(dir, t.Dir, out[i], timeout)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
				if err == nil {
					out[i].Status, out[i].Rechecked = status, true
				}
			}
		}()
	}
	for _, i := range todo {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out, first
}

// runOwn applies m in the module copy dir, runs the package's tests (or,
// for a mutant gremlins killed, builds the package), undoes m, and says
// what became of it.
func runOwn(dir, pkg string, m mutant, timeout time.Duration) (string, error) {
	path := filepath.Join(dir, m.File)
	orig, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	mutated, err := mutate(orig, m.Line, m.Column, m.Kind)
	if err != nil {
		return "", fmt.Errorf("%s: %w", m, err)
	}
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		return "", err
	}
	defer os.WriteFile(path, orig, 0o644)
	if m.Status != notCovered { // killed by gremlins: does it compile?
		build := exec.Command("go", "build", "-tags", "mutate", "./"+pkg)
		build.Dir = dir
		if build.Run() != nil {
			return notViable, nil
		}
		return m.Status, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-tags", "mutate", "-count=1", "-failfast", "./"+pkg)
	cmd.Dir = dir
	output, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return timedOut, nil
	case err == nil:
		return lived, nil
	case bytes.Contains(output, []byte("[build failed]")) || bytes.Contains(output, []byte("[setup failed]")):
		return notViable, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return killed, nil
	}
	return "", fmt.Errorf("%s: go test: %w\n%s", m, err, output)
}

// modulePath is the module's path, from the go.mod at root.
func modulePath(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
			return strconv.Unquote(`"` + strings.Trim(f[1], `"`) + `"`)
		}
	}
	return "", fmt.Errorf("%s/go.mod names no module", root)
}
