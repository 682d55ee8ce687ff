package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// unknownVersion is a semantic version CHANGELOG.md has no section for.
const unknownVersion = "v99.0.0"

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(changelog), strings.TrimSuffix(unknownVersion, ".0.0")+".") {
		t.Fatalf("CHANGELOG.md names %s: pick another unknown version for this test", unknownVersion)
	}
	return root
}

// A release whose version CHANGELOG.md has no section for, or that is no
// semantic version, fails before anything is built or written: it makes
// no folder, and an earlier bundle's folder of that name stays as it was.
func TestReleaseChecksTheVersionFirst(t *testing.T) {
	root := repoRoot(t)
	for _, tc := range []struct {
		version, want string
		earlier       bool
	}{
		{unknownVersion, "CHANGELOG.md has no section for " + unknownVersion, false},
		{"0.1.0", "not a semantic version", false},
		{unknownVersion, "CHANGELOG.md has no section for " + unknownVersion, true},
	} {
		t.Run(fmt.Sprintf("%s earlier bundle %v", tc.version, tc.earlier), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), tc.version)
			kept := filepath.Join(out, "SHA256SUMS")
			if tc.earlier {
				if err := os.MkdirAll(out, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(kept, []byte("earlier\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			err := build(t.Context(), root, "release", []string{"-version", tc.version, "-out", out})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("release %s: %v, want an error saying %q", tc.version, err, tc.want)
			}
			t.Logf("release %s failed in %v", tc.version, time.Since(start).Round(time.Millisecond))
			if tc.earlier {
				if data, err := os.ReadFile(kept); err != nil || string(data) != "earlier\n" {
					t.Errorf("release %s changed the earlier bundle's %s: %q %v", tc.version, kept, data, err)
				}
			} else if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("release %s left %s (stat: %v)", tc.version, out, err)
			}
		})
	}
}

// make release on a version CHANGELOG.md has no section for fails before
// it builds and leaves no _out/release/<version> folder. The command is
// compiled and linked first, so that the time logged is make's and the
// check's, not a cold build's, beside what go run's cache look-up takes
// on this machine now.
func TestMakeReleaseFailsFastOnAnUnknownVersion(t *testing.T) {
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// go run caches the executable it links: the first run (the usage,
	// status 2) leaves make's go run only the cache's look-up, which the
	// second measures: on a loaded machine it alone takes seconds.
	var lookup time.Duration
	for range 2 {
		start := time.Now()
		warm := exec.CommandContext(ctx, "go", "run", "./hack/release")
		warm.Dir = root
		if out, err := warm.CombinedOutput(); !strings.Contains(string(out), "usage: release") {
			t.Fatalf("go run ./hack/release: %v\n%s", err, out)
		}
		lookup = time.Since(start)
	}
	folder := filepath.Join(root, "_out", "release", unknownVersion)
	if _, err := os.Stat(folder); !os.IsNotExist(err) {
		t.Fatalf("%s exists before the test (stat: %v)", folder, err)
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", root, "release", "VERSION="+unknownVersion)
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err == nil {
		t.Fatalf("make release VERSION=%s succeeded:\n%s", unknownVersion, out)
	}
	if !strings.Contains(string(out), "CHANGELOG.md has no section for "+unknownVersion) {
		t.Errorf("make release VERSION=%s: %v, output lacks the reason:\n%s", unknownVersion, err, out)
	}
	if _, err := os.Stat(folder); !os.IsNotExist(err) {
		t.Errorf("make release VERSION=%s left %s (stat: %v)", unknownVersion, folder, err)
	}
	t.Logf("make release VERSION=%s failed in %v (go run's look-up alone: %v): %s", unknownVersion,
		d.Round(10*time.Millisecond), lookup.Round(10*time.Millisecond), strings.TrimSpace(string(out)))
}
