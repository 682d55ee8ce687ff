package main

import (
	"slices"
	"strings"
	"testing"
)

// TestWalkFixture: the walk of testdata/fixture's Top, whose answer is
// known: helper (of Top's own file) read in place, so its call of first
// opens b.go; second before Method (arguments first); the interface's
// method in its interface's file; first not read again; third a return.
func TestWalkFixture(t *testing.T) {
	r, err := Walk("./testdata/fixture", "Top")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range r.Stops {
		f := s.File[strings.LastIndex(s.File, "/")+1:]
		got = append(got, f+":"+strings.Join(s.Funcs, ","))
	}
	want := []string{"b.go:fixture.first", "c.go:fixture.second,T.Method", "doer.go:Doer.Do", "b.go:fixture.third"}
	if !slices.Equal(got, want) {
		t.Errorf("stops %q, want %q", got, want)
	}
	if len(r.Stops) != 4 || r.Files() != 3 || r.Returns() != 1 || !r.Stops[3].Return {
		t.Errorf("%d stops in %d files, %d returns; want 4, 3, 1", len(r.Stops), r.Files(), r.Returns())
	}
	if !strings.HasSuffix(r.String(), "walk: 4 stops in 3 files, 1 returns\n") {
		t.Errorf("summary line: %q", r.String())
	}
}

func TestWalkUnknownFunction(t *testing.T) {
	if _, err := Walk("./testdata/fixture", "Nowhere"); err == nil || !strings.Contains(err.Error(), "no function Nowhere") {
		t.Errorf("err = %v", err)
	}
}
