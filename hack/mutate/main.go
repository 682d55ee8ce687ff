// Command mutate is make mutate: mutation testing of tether's decision
// code with gremlins (hack/mutate.sh installs the pinned version and runs
// this). For each package of targets it mutates only the listed files, in
// a copy of the module (the files git tracks or would track, as they are
// in the work tree), and judges each mutant by the package's tests built
// with the tag mutate: its unit tests and a short simulator run
// (mutate_sim_test.go). It prints each package's killed, lived and not
// covered mutants and lists the survivors, then, as its last line,
//
//	mutate: <P> packages, <K> killed, <L> lived, <N> not covered, lowest <package> <percent>%
//
// A package that kills less than -min percent of its covered mutants is
// named before that line; the exit status is 0 all the same, so that the
// line stays the last one make prints (it is 1 only when a run cannot be
// made). Gremlins' output and JSON report per package are kept in -out.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	gremlins := flag.String("gremlins", "", "the gremlins binary")
	workers := flag.Int("workers", 2, "mutants tested at once")
	coefficient := flag.Int("timeout-coefficient", 10, "a mutant's tests time out after this many times the package's coverage run")
	only := flag.String("only", "", "comma-separated package folders to mutate (default: all of them)")
	outDir := flag.String("out", "_out/mutate", "folder for gremlins' logs and reports")
	minimum := flag.Float64("min", 90, "name each package that kills less than this percent")
	flag.Parse()
	if err := run(*gremlins, *workers, *coefficient, *only, *outDir, *minimum); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func run(gremlins string, workers, coefficient int, only, outDir string, minimum float64) error {
	if gremlins == "" {
		return fmt.Errorf("-gremlins is required")
	}
	var chosen []target
	for _, t := range targets {
		if only == "" || slices.Contains(strings.Split(only, ","), t.Dir) {
			chosen = append(chosen, t)
		}
	}
	if len(chosen) == 0 {
		return fmt.Errorf("-only %q names none of the targets", only)
	}
	outDir, err := filepath.Abs(outDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	// Gremlins copies the whole module folder once per worker: a copy of
	// the sources alone keeps caches and build outputs out of it, and the
	// work tree out of reach.
	src, err := os.MkdirTemp("", "tether-mutate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if err := copySources(src); err != nil {
		return err
	}
	start := time.Now()
	var tallies []tally
	for _, t := range chosen {
		tl, err := mutatePackage(gremlins, src, outDir, t, workers, coefficient)
		if err != nil {
			return err
		}
		fmt.Print(packageReport(tl))
		tallies = append(tallies, tl)
	}
	fmt.Printf("mutate: %d packages in %s\n", len(tallies), time.Since(start).Round(time.Second))
	for _, t := range tallies {
		if t.percent() < minimum {
			fmt.Printf("mutate: %s kills %.1f%% of its covered mutants, under the goal of %.0f%%\n", t.Package, t.percent(), minimum)
		}
	}
	fmt.Println(lastLine(tallies))
	return nil
}

// mutatePackage runs gremlins on one target in the copy src.
func mutatePackage(gremlins, src, outDir string, t target, workers, coefficient int) (tally, error) {
	files, err := goFiles(filepath.Join(src, t.Dir))
	if err != nil {
		return tally{}, err
	}
	for _, f := range t.Files {
		if !slices.Contains(files, f) {
			return tally{}, fmt.Errorf("%s/%s is listed in hack/mutate's targets but does not exist", t.Dir, f)
		}
	}
	name := strings.ReplaceAll(t.Dir, "/", "-")
	report, logPath := filepath.Join(outDir, name+".json"), filepath.Join(outDir, name+".log")
	_ = os.Remove(report)
	args := []string{"unleash", "--tags", "mutate", "--workers", fmt.Sprint(workers),
		"--timeout-coefficient", fmt.Sprint(coefficient), "--output", report}
	for _, e := range excludes(t, files) {
		args = append(args, "--exclude-files", e)
	}
	args = append(args, "./"+t.Dir)
	logFile, err := os.Create(logPath)
	if err != nil {
		return tally{}, err
	}
	defer logFile.Close()
	start := time.Now()
	fmt.Printf("== %s (%s): gremlins with %d workers, log in %s\n", t.Dir, strings.Join(t.Files, ", "), workers, logPath)
	cmd := exec.Command(gremlins, args...)
	cmd.Dir = src
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Run(); err != nil {
		return tally{}, fmt.Errorf("gremlins on %s: %w (see %s)", t.Dir, err, logPath)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		return tally{}, fmt.Errorf("gremlins on %s wrote no report (see %s): %w", t.Dir, logPath, err)
	}
	ms, err := parseReport(t.Dir, data)
	if err != nil {
		return tally{}, err
	}
	fmt.Printf("   gremlins done in %s; make mutate's own runs (see recheck.go)\n", time.Since(start).Round(time.Second))
	if ms, err = recheck(src, t, ms, workers, coefficient); err != nil {
		return tally{}, err
	}
	fmt.Printf("   done in %s\n", time.Since(start).Round(time.Second))
	return tallyOf(t.Dir, ms)
}

// copySources copies the module's files that git tracks, or would track
// (untracked and not ignored), from the current folder into dst.
func copySources(dst string) error {
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		data, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		} else if err != nil {
			return err
		}
		info, err := os.Stat(f)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}
