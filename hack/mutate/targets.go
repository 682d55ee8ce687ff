package main

import (
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// target is one package that make mutate mutates, and the files of it
// that hold decision code. Only those files are mutated; the package's
// whole test suite (with the build tag mutate, which adds its short
// simulator run) judges every mutant.
type target struct {
	Dir   string   // the package's folder, relative to the module root
	Files []string // the mutated files, relative to Dir
	// NoSim, when set, says why the package has no short simulator run
	// (mutate_sim_test.go): its unit tests alone judge its mutants.
	NoSim string
}

// targets is the decision code of tether. A file listed here whose
// mutants cannot be killed is explained in docs/testing.md.
var targets = []target{
	{Dir: "pkg/nodeloss", Files: []string{"decide.go", "nodeloss.go", "pin.go", "tracker.go"}},
	{Dir: "pkg/binder", Files: []string{"decide_claim.go", "decide_volume.go", "match.go", "settled.go"}},
	{Dir: "pkg/provisioner/records", Files: []string{"decide.go"}}, // Decide and what it reads
	{Dir: "pkg/provisioner/static", Files: []string{
		"decide.go",    // Decide
		"reclaimer.go", // what carries Decide out: the finalizer's removal
	}},
	{Dir: "pkg/provisioner", Files: []string{
		"detach.go", // decideDetach
		"drop.go",   // recordedVolume, dropRecord, dropBeforeRelease
	}},
	{Dir: "pkg/provisioner/scope", Files: []string{
		"rules.go",  // Scope.Claim, Volume, Ours, Settled, MayBeOn, KeepClaim, KeepVolume
		"keeper.go", // Keep, Forget or Skip per watch event
		"seen.go",   // the names of what is not kept whole
		"gone.go",   // the UIDs of the claims seen deleted
	}},
	{Dir: "pkg/provisioner/sweep", Files: []string{
		"decide.go", // the sweep's Decide
		"account.go",
	}},
	{Dir: "pkg/server", Files: []string{
		"reviews.go",   // the metrics' Guard: TokenReview and SubjectAccessReview, cached
		"reviewkey.go", // the access cache's key, what an entry holds
		"ttlcache.go",  // the caches, bounded in bytes
	}, NoSim: "the simulator runs no HTTP endpoint"},
}

// excludes are the gremlins --exclude-files patterns that leave only
// t.Files of the non-test Go files under t.Dir: one anchored pattern per
// other file (gremlins matches them against paths relative to t.Dir).
func excludes(t target, goFiles []string) []string {
	var out []string
	for _, f := range goFiles {
		if strings.HasSuffix(f, "_test.go") || slices.Contains(t.Files, f) {
			continue
		}
		out = append(out, "^"+regexp.QuoteMeta(f)+"$")
	}
	return out
}

// goFiles lists the .go files under dir, relative to it, with / as the
// separator.
func goFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".go" {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	return out, err
}
