package main

import (
	"strings"
	"testing"
	"time"
)

const sample = `package p

const grace = 90 * second

func f(a, b int, s string) (int, string) {
	switch {
	case a == b:
		return 1, "x" + s
	case a < b:
		return 2, ""
	}
	if a > b {
		a--
	}
	return -a, s
}

func g(a int) bool {
	switch {
	case a != 0:
		return true
	}
	return false
}
`

func TestMutate(t *testing.T) {
	for _, c := range []struct {
		name      string
		line, col int
		kind      string
		want      string // the line after the mutation
		wantErr   bool
	}{
		{"negation", 7, 9, "CONDITIONALS_NEGATION", "\tcase a != b:", false},
		{"boundary", 9, 9, "CONDITIONALS_BOUNDARY", "\tcase a <= b:", false},
		{"negation of <", 9, 9, "CONDITIONALS_NEGATION", "\tcase a >= b:", false},
		{"arithmetic in a constant", 3, 18, "ARITHMETIC_BASE", "const grace = 90 / second", false},
		{"string concatenation", 8, 17, "ARITHMETIC_BASE", "\t\treturn 1, \"x\" - s", false},
		{"decrement", 13, 4, "INCREMENT_DECREMENT", "\t\ta++", false},
		{"negative", 15, 9, "INVERT_NEGATIVES", "\treturn +a, s", false},
		{"no token there", 7, 8, "CONDITIONALS_NEGATION", "", true},
		{"kind does not fit the token", 7, 9, "INCREMENT_DECREMENT", "", true},
	} {
		got, err := mutate([]byte(sample), c.line, c.col, c.kind)
		if c.wantErr {
			if err == nil {
				t.Errorf("%s: no error", c.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if l := lineOf(string(got), c.line); l != c.want {
			t.Errorf("%s: line %d is %q, want %q", c.name, c.line, l, c.want)
		}
	}
}

func lineOf(s string, n int) string {
	return strings.Split(s, "\n")[n-1]
}

func TestReached(t *testing.T) {
	// As go test -cover makes them: f's body up to its switch ran, g's
	// did not; neither block holds a case's condition.
	blocks := []block{
		{startLine: 5, startCol: 44, endLine: 6, endCol: 9, ran: true},
		{startLine: 7, startCol: 13, endLine: 8, endCol: 20, ran: true},
		{startLine: 18, startCol: 20, endLine: 19, endCol: 9, ran: false},
	}
	for _, c := range []struct {
		name      string
		line, col int
		want      bool
	}{
		{"case of a switch that ran", 9, 9, true},
		{"first case of a switch that ran", 7, 9, true},
		{"case of a switch that did not run", 20, 9, false},
		{"constant", 3, 18, true},
		{"if condition outside any block that ran", 12, 7, false},
	} {
		got, err := reached([]byte(sample), blocks, c.line, c.col)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseProfile(t *testing.T) {
	data := "mode: set\n" +
		"example.com/m/pkg/x/a.go:5.44,6.9 2 1\n" +
		"example.com/m/pkg/x/a.go:18.20,19.9 1 0\n" +
		"example.com/m/pkg/xy/b.go:1.1,2.2 1 1\n" +
		"example.com/m/pkg/x/sub/c.go:1.1,2.2 1 1\n"
	got, err := parseProfile([]byte(data), "example.com/m/pkg/x/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got["a.go"]) != 2 || len(got["sub/c.go"]) != 1 {
		t.Fatalf("files %v", got)
	}
	if !ran(got["a.go"], 6, 3) || ran(got["a.go"], 18, 25) || ran(got["a.go"], 7, 1) {
		t.Errorf("ran: wrong for %v", got["a.go"])
	}
	if _, err := parseProfile([]byte("example.com/m/pkg/x/a.go:5.44 2 1\n"), "example.com/m/pkg/x/"); err == nil {
		t.Error("a broken line: no error")
	}
}

func TestNeedsOwnRun(t *testing.T) {
	blocks := []block{{startLine: 5, startCol: 44, endLine: 6, endCol: 9, ran: true}}
	for _, c := range []struct {
		name string
		m    mutant
		want bool
	}{
		{"not covered case of a switch that ran", mutant{Line: 7, Column: 9, Kind: "CONDITIONALS_NEGATION", Status: notCovered}, true},
		{"not covered elsewhere", mutant{Line: 12, Column: 7, Kind: "CONDITIONALS_NEGATION", Status: notCovered}, false},
		{"arithmetic gremlins killed: built", mutant{Line: 8, Column: 17, Kind: "ARITHMETIC_BASE", Status: killed}, true},
		{"arithmetic that timed out: built", mutant{Line: 8, Column: 17, Kind: "ARITHMETIC_BASE", Status: timedOut}, true},
		{"arithmetic that lived: it compiled", mutant{Line: 8, Column: 17, Kind: "ARITHMETIC_BASE", Status: lived}, false},
		{"negation gremlins killed", mutant{Line: 7, Column: 9, Kind: "CONDITIONALS_NEGATION", Status: killed}, false},
	} {
		got, err := needsOwnRun(c.m, []byte(sample), blocks)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestOwnTimeout(t *testing.T) {
	for _, c := range []struct {
		coefficient int
		cover, want time.Duration
	}{
		{5, 30 * time.Second, ownRunFloor},
		{5, 3 * time.Minute, 15 * time.Minute},
	} {
		if got := ownTimeout(c.coefficient, c.cover); got != c.want {
			t.Errorf("ownTimeout(%d, %s) = %s, want %s", c.coefficient, c.cover, got, c.want)
		}
	}
}
