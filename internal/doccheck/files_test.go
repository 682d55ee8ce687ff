package doccheck

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// repoFiles returns the files under the repository's dirs (paths
// relative to root; a file named there is taken as it is) whose names end
// in one of exts, sorted; a directory named _out, .cache or testdata is
// left out.
func repoFiles(t *testing.T, root string, dirs []string, exts ...string) []string {
	t.Helper()
	var out []string
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				switch e.Name() {
				case "_out", ".cache", "testdata", "node_modules":
					return filepath.SkipDir
				}
				return nil
			}
			for _, ext := range exts {
				if strings.HasSuffix(p, ext) {
					rel, _ := filepath.Rel(root, p)
					out = append(out, rel)
					break
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Fatalf("no %v file under %v", exts, dirs)
	}
	return slices.Compact(out)
}

// markdownFiles are the Markdown a reader reads: the README, the
// CHANGELOG, SECURITY.md, docs/ and the Markdown under deploy/ and
// examples/.
func markdownFiles(t *testing.T, root string) []string {
	return repoFiles(t, root, []string{"README.md", "CHANGELOG.md", "SECURITY.md", "docs", "deploy", "examples"}, ".md")
}

// readerFiles are markdownFiles and the manifests, rules and dashboards
// under deploy/ and examples/.
func readerFiles(t *testing.T, root string) []string {
	return repoFiles(t, root, []string{"README.md", "CHANGELOG.md", "SECURITY.md", "docs", "deploy", "examples"}, ".md", ".yaml", ".yml", ".json")
}

var (
	depsMu    sync.Mutex
	depsCache = map[string][]string{}
)

// deps is Deps, each answer kept for the test binary's life (go list
// costs seconds on a busy machine, and several tests ask the same).
func deps(root, cmd string, prefixes ...string) ([]string, error) {
	key := root + "\x00" + cmd + "\x00" + strings.Join(prefixes, "\x00")
	depsMu.Lock()
	defer depsMu.Unlock()
	if d, ok := depsCache[key]; ok {
		return d, nil
	}
	d, err := Deps(root, cmd, prefixes...)
	if err == nil {
		depsCache[key] = d
	}
	return d, err
}
