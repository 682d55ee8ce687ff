package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseReportCountsEachStatus(t *testing.T) {
	data := `{"files":[
	 {"file_name":"decide.go","mutations":[
	  {"type":"CONDITIONALS_NEGATION","status":"KILLED","line":9,"column":3},
	  {"type":"CONDITIONALS_BOUNDARY","status":"LIVED","line":7,"column":5},
	  {"type":"ARITHMETIC_BASE","status":"TIMED OUT","line":4,"column":1},
	  {"type":"INVERT_NEGATIVES","status":"NOT VIABLE","line":2,"column":1},
	  {"type":"CONDITIONALS_NEGATION","status":"NOT COVERED","line":3,"column":8}]},
	 {"file_name":"a.go","mutations":[
	  {"type":"CONDITIONALS_NEGATION","status":"LIVED","line":20,"column":2}]}]}`
	ms, err := parseReport("pkg/x", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tallyOf("pkg/x", ms)
	if err != nil {
		t.Fatal(err)
	}
	if got.Killed != 2 || got.TimedOut != 1 || got.Lived != 2 || got.NotCovered != 1 || got.NotViable != 1 {
		t.Errorf("counts: %+v", got)
	}
	var lived []string
	for _, m := range got.LivedList {
		lived = append(lived, m.String())
	}
	want := []string{"pkg/x/a.go:20:2 CONDITIONALS_NEGATION", "pkg/x/decide.go:7:5 CONDITIONALS_BOUNDARY"}
	if !slices.Equal(lived, want) {
		t.Errorf("lived %q, want %q (sorted by file and line)", lived, want)
	}
	if len(got.TimedOutList) != 1 || got.TimedOutList[0].Line != 4 {
		t.Errorf("timed out: %v", got.TimedOutList)
	}
}

func TestParseReportRefusesBadJSON(t *testing.T) {
	if _, err := parseReport("pkg/x", []byte(`{`)); err == nil {
		t.Error("no error")
	}
}

// Gremlins skips mutants only with --diff, which make mutate never passes.
func TestTallyRefusesAnUnknownStatus(t *testing.T) {
	if _, err := tallyOf("pkg/x", []mutant{{File: "pkg/x/a.go", Line: 1, Column: 1, Kind: "X", Status: "SKIPPED"}}); err == nil {
		t.Error("no error")
	}
}

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		t    tally
		want float64
	}{
		{tally{Killed: 39, Lived: 2, NotCovered: 6}, 100 * 39.0 / 41},
		{tally{Killed: 0, Lived: 3}, 0},
		{tally{NotCovered: 4}, 100},
		{tally{}, 100},
	} {
		if got := c.t.percent(); got != c.want {
			t.Errorf("%+v: %v, want %v", c.t, got, c.want)
		}
	}
}

func TestLastLine(t *testing.T) {
	for _, c := range []struct {
		name string
		ts   []tally
		want string
	}{
		{"lowest named", []tally{
			{Package: "pkg/nodeloss", Killed: 39, Lived: 2, NotCovered: 6},
			{Package: "pkg/binder", Killed: 90, Lived: 10, NotCovered: 1},
			{Package: "pkg/provisioner", Killed: 50, Lived: 0},
		}, "mutate: 3 packages, 179 killed, 12 lived, 7 not covered, lowest pkg/binder 90.0%"},
		{"first of equals", []tally{
			{Package: "a", Killed: 1, Lived: 1}, {Package: "b", Killed: 2, Lived: 2},
		}, "mutate: 2 packages, 3 killed, 3 lived, 0 not covered, lowest a 50.0%"},
		{"none", nil, "mutate: 0 packages, 0 killed, 0 lived, 0 not covered, lowest none 100.0%"},
	} {
		if got := lastLine(c.ts); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestPackageReportListsSurvivors(t *testing.T) {
	tl := tally{Package: "pkg/x", Killed: 9, Lived: 1, NotCovered: 1, TimedOut: 1,
		LivedList:      []mutant{{File: "pkg/x/a.go", Line: 3, Column: 4, Kind: "CONDITIONALS_BOUNDARY"}},
		NotCoveredList: []mutant{{File: "pkg/x/b.go", Line: 5, Column: 6, Kind: "ARITHMETIC_BASE"}},
		TimedOutList:   []mutant{{File: "pkg/x/c.go", Line: 7, Column: 8, Kind: "INCREMENT_DECREMENT"}},
	}
	got := packageReport(tl)
	for _, want := range []string{
		"pkg/x: 9 killed, 1 lived, 1 not covered (90.0% killed; 1 of the killed timed out, 0 not viable)\n",
		"  lived       pkg/x/a.go:3:4 CONDITIONALS_BOUNDARY\n",
		"  not covered pkg/x/b.go:5:6 ARITHMETIC_BASE\n",
		"  timed out   pkg/x/c.go:7:8 INCREMENT_DECREMENT\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

func TestExcludesLeaveOnlyTheListedFiles(t *testing.T) {
	tg := target{Dir: "pkg/x", Files: []string{"decide.go", "match.go"}}
	got := excludes(tg, []string{"decide.go", "decide_test.go", "match.go", "store.go", "sub/a.go", "a.b.go"})
	want := []string{`^store\.go$`, `^sub/a\.go$`, `^a\.b\.go$`}
	if !slices.Equal(got, want) {
		t.Errorf("excludes %q, want %q", got, want)
	}
}
