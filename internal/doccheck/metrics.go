package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
)

// metricRef is a name of tether's metrics in text: tether_ then lower
// case, not inside another word (kubectl-tether_v0.1.0 is a file name);
// a * right after it makes it a prefix (tether_binder_*).
var metricRef = regexp.MustCompile(`(^|[^A-Za-z0-9_-])(tether_[a-z][a-z0-9_]*)(\*?)`)

// A Ref is a name found in a file, with its line.
type Ref struct {
	Name string
	Line int
	// Prefix: the name stands for every name it begins (a trailing *).
	Prefix bool
}

// MetricRefs returns every name of a tether metric in text (Markdown,
// rules, a dashboard's JSON), with its line.
func MetricRefs(text string) []Ref {
	var refs []Ref
	for i, l := range strings.Split(text, "\n") {
		for _, m := range metricRef.FindAllStringSubmatch(l, -1) {
			refs = append(refs, Ref{Name: m[2], Line: i + 1, Prefix: m[3] == "*"})
		}
	}
	return refs
}

// CodeMetrics returns the metric names the Go files register: every
// string literal of the form tether_name (a metric's Name, a Desc's
// fqName, a constant).
func CodeMetrics(files []string) (map[string]bool, error) {
	names := map[string]bool{}
	fset := token.NewFileSet()
	exact := regexp.MustCompile(`^tether_[a-z][a-z0-9_]*$`)
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if v, ok := stringLit(exprOf(n)); ok && exact.MatchString(v) {
				names[v] = true
			}
			return true
		})
	}
	return names, nil
}

func exprOf(n ast.Node) ast.Expr {
	e, _ := n.(ast.Expr)
	return e
}

// histogramSeries are the suffixes of a histogram's series.
var histogramSeries = []string{"_bucket", "_sum", "_count"}

// CheckMetricRefs returns a problem, "path:line: ...", for each name in
// refs that is not a metric of code: not one of its names, nor a
// series of one as a histogram has them (_bucket, _sum, _count; the
// code's names do not say which metric is a histogram), nor, for a prefix,
// the beginning of one.
func CheckMetricRefs(path string, refs []Ref, code map[string]bool) []string {
	var problems []string
	for _, r := range refs {
		if metricKnown(r, code) {
			continue
		}
		what := "metric"
		if r.Prefix {
			what = "metric prefix"
		}
		problems = append(problems, fmt.Sprintf("%s:%d: %s is no %s the code registers", path, r.Line, r.Name, what))
	}
	return problems
}

func metricKnown(r Ref, code map[string]bool) bool {
	if r.Prefix {
		for name := range code {
			if strings.HasPrefix(name, r.Name) {
				return true
			}
		}
		return false
	}
	if code[r.Name] {
		return true
	}
	for _, s := range histogramSeries {
		if base, ok := strings.CutSuffix(r.Name, s); ok && code[base] {
			return true
		}
	}
	return false
}
