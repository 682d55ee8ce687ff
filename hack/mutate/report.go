package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// gremlinsReport is the part of gremlins' --output JSON that make mutate
// reads: each mutant's file (relative to the package), place, kind and
// status.
type gremlinsReport struct {
	Files []struct {
		Name      string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// mutant is one mutation and what became of it.
type mutant struct {
	File         string // relative to the module root
	Line, Column int
	Kind         string // gremlins' mutator, e.g. CONDITIONALS_NEGATION
	Status       string // gremlins' status, e.g. LIVED
	// Rechecked: make mutate's own run decided Status (recheck.go).
	Rechecked bool
}

func (m mutant) String() string {
	s := fmt.Sprintf("%s:%d:%d %s", m.File, m.Line, m.Column, m.Kind)
	if m.Rechecked {
		s += " (make mutate's own run)"
	}
	return s
}

// tally is one package's outcome. A mutant whose tests ran past the
// timeout counts as killed (the tests did not pass with it); TimedOut
// says how many of Killed did so, and which are listed, as a run on a
// loaded machine can time out a mutant the tests would have let live. A
// mutant that does not compile (NOT VIABLE) counts nowhere.
type tally struct {
	Package                   string
	Killed, Lived, NotCovered int
	TimedOut, NotViable       int
	LivedList, NotCoveredList []mutant
	TimedOutList              []mutant
}

// parseReport reads gremlins' JSON for the package in dir.
func parseReport(dir string, data []byte) ([]mutant, error) {
	var r gremlinsReport
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("gremlins' report for %s: %w", dir, err)
	}
	var out []mutant
	for _, f := range r.Files {
		for _, m := range f.Mutations {
			out = append(out, mutant{File: dir + "/" + f.Name, Line: m.Line, Column: m.Column, Kind: m.Type, Status: m.Status})
		}
	}
	sortMutants(out)
	return out, nil
}

// tallyOf counts the mutants of the package in dir.
func tallyOf(dir string, ms []mutant) (tally, error) {
	t := tally{Package: dir}
	for _, mu := range ms {
		switch mu.Status {
		case killed:
			t.Killed++
		case timedOut:
			t.Killed++
			t.TimedOut++
			t.TimedOutList = append(t.TimedOutList, mu)
		case lived:
			t.Lived++
			t.LivedList = append(t.LivedList, mu)
		case notCovered:
			t.NotCovered++
			t.NotCoveredList = append(t.NotCoveredList, mu)
		case notViable:
			t.NotViable++
		default:
			return tally{}, fmt.Errorf("mutant %s has status %q", mu, mu.Status)
		}
	}
	for _, l := range [][]mutant{t.LivedList, t.NotCoveredList, t.TimedOutList} {
		sortMutants(l)
	}
	return t, nil
}

// Gremlins' statuses, which make mutate's own runs (recheck.go) use too.
const (
	killed     = "KILLED"
	lived      = "LIVED"
	timedOut   = "TIMED OUT"
	notCovered = "NOT COVERED"
	notViable  = "NOT VIABLE"
)

func sortMutants(l []mutant) {
	sort.Slice(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Kind < b.Kind
	})
}

// percent is the share of killed mutants among killed and lived (100 when
// there are none).
func (t tally) percent() float64 {
	if t.Killed+t.Lived == 0 {
		return 100
	}
	return 100 * float64(t.Killed) / float64(t.Killed+t.Lived)
}

// packageReport is the lines make mutate prints for one package.
func packageReport(t tally) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d killed, %d lived, %d not covered (%.1f%% killed; %d of the killed timed out, %d not viable)\n",
		t.Package, t.Killed, t.Lived, t.NotCovered, t.percent(), t.TimedOut, t.NotViable)
	for _, l := range []struct {
		what string
		list []mutant
	}{{"lived", t.LivedList}, {"not covered", t.NotCoveredList}, {"timed out", t.TimedOutList}} {
		for _, m := range l.list {
			fmt.Fprintf(&b, "  %-11s %s\n", l.what, m)
		}
	}
	return b.String()
}

// lastLine is make mutate's closing line over all packages; the lowest
// package is the one with the smallest share killed (the first of equals).
func lastLine(ts []tally) string {
	var k, l, n int
	low := -1
	for i, t := range ts {
		k, l, n = k+t.Killed, l+t.Lived, n+t.NotCovered
		if low < 0 || t.percent() < ts[low].percent() {
			low = i
		}
	}
	lowest := "none 100.0%"
	if low >= 0 {
		lowest = fmt.Sprintf("%s %.1f%%", ts[low].Package, ts[low].percent())
	}
	return fmt.Sprintf("mutate: %d packages, %d killed, %d lived, %d not covered, lowest %s", len(ts), k, l, n, lowest)
}
