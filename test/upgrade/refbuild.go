package upgrade

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/tether-csi/tether/test/cluster"
)

// Binaries are one version's programs.
type Binaries struct {
	// Version names it in logs: "current" or the commit's short hash.
	Version                     string
	Provisioner, Binder, Driver string
}

// programs are the main packages a version is built of, by Binaries field.
var programs = []string{"./cmd/provisioner", "./cmd/binder", "./examples/local-driver"}

// Current is this work tree's programs (cluster.BuildBinary).
func Current(t cluster.T) Binaries {
	t.Helper()
	return Binaries{Version: "current", Provisioner: cluster.BuildBinary(t, programs[0]),
		Binder: cluster.BuildBinary(t, programs[1]), Driver: cluster.BuildBinary(t, programs[2])}
}

// BuildRef builds the programs of a git ref of this repository: `git
// archive` of its commit extracted into .cache/upgrade/<commit>/src, then
// `go build` there (with the build tags of its Makefile) into .cache/upgrade/<commit>/bin (the module cache is
// the shared one: no network). A commit built once is reused. A ref that is
// not in the repository fails the test.
func BuildRef(t cluster.T, ref string) Binaries {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", ref+"^{commit}").Output()
	commit := strings.TrimSpace(string(out))
	if err != nil || commit == "" {
		t.Fatalf("upgrade: the previous version %q is not a commit of this repository (%s): the upgrade tests need a full clone "+
			"(git fetch --unshallow), or TETHER_UPGRADE_FROM naming a commit it has", ref, root)
	}
	dir := filepath.Join(root, ".cache", "upgrade", commit)
	bins := Binaries{Version: commit[:12], Provisioner: filepath.Join(dir, "bin", "provisioner"),
		Binder: filepath.Join(dir, "bin", "binder"), Driver: filepath.Join(dir, "bin", "local-driver")}
	paths := []string{bins.Provisioner, bins.Binder, bins.Driver}
	if allExist(paths) {
		return bins
	}
	// Built in a folder of this process's, renamed into place when whole:
	// two test binaries building at once each make their own.
	if err := os.MkdirAll(filepath.Join(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	work, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(work)
	src := filepath.Join(work, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("bash", "-c", `set -o pipefail; git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "archive", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("upgrade: git archive %s: %v\n%s", commit, err, out)
	}
	tags := refBuildTags(src)
	for i, pkg := range programs {
		cmd := exec.Command("go", "build", "-trimpath", "-tags", tags, "-ldflags",
			"-X github.com/tether-csi/tether/internal/version.version="+commit[:12], "-o", filepath.Join(work, filepath.Base(paths[i])), pkg)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("upgrade: go build %s of %s: %v\n%s", pkg, commit, err, out)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if err := os.Rename(filepath.Join(work, filepath.Base(p)), p); err != nil {
			t.Fatal(err)
		}
	}
	// The source stays beside the binaries, to read what ran.
	if err := os.RemoveAll(filepath.Join(dir, "src")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(src, filepath.Join(dir, "src")); err != nil {
		t.Fatal(fmt.Errorf("upgrade: keeping the source of %s: %w", commit, err))
	}
	return bins
}

// refBuildTags are the build tags a version's make build used: its
// Makefile's BUILD_TAGS, none before it had them.
func refBuildTags(src string) string {
	makefile, err := os.ReadFile(filepath.Join(src, "Makefile"))
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(makefile)) {
		if v, ok := strings.CutPrefix(line, "BUILD_TAGS := "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func allExist(paths []string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}
