package doccheck

import (
	"os"
	"path/filepath"
	"testing"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docs are the documents whose links are checked: the README, the
// CHANGELOG and every page of docs/.
func docs(t *testing.T, root string) []string {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	out := []string{"README.md", "CHANGELOG.md", "SECURITY.md"}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel)
	}
	return out
}

// Every relative link and anchor of the README, the CHANGELOG,
// SECURITY.md and docs/*.md resolves, by GitHub's rules for anchors.
func TestLinksResolve(t *testing.T) {
	r := root(t)
	for _, p := range CheckLinks(r, docs(t, r)) {
		t.Error(p)
	}
}

const (
	modulePrefix  = "github.com/tether-csi/tether/"
	libraryPrefix = "sigs.k8s.io/sig-storage-lib-external-provisioner/"
)

// codeReasons is what a command records: tether's packages it imports
// (their Reason* constants and Event calls), and, for the provisioner,
// the Event calls of the provisioner library, whose events it relies on.
func codeReasons(t *testing.T, root, cmd string) map[string]string {
	t.Helper()
	own, err := deps(root, cmd, modulePrefix)
	if err != nil {
		t.Fatal(err)
	}
	lib, err := deps(root, cmd, libraryPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var sources []Source
	for _, d := range own {
		sources = append(sources, Source{Dir: d, Consts: true})
	}
	for _, d := range lib {
		sources = append(sources, Source{Dir: d})
	}
	reasons, err := CodeReasons(sources)
	if err != nil {
		t.Fatal(err)
	}
	if len(reasons) == 0 {
		t.Fatalf("%s: no event reason found in its code: the reading is broken", cmd)
	}
	for r, where := range reasons {
		if rel, err := filepath.Rel(root, where); err == nil && !filepath.IsAbs(rel) && rel[0] != '.' {
			reasons[r] = rel
		}
	}
	return reasons
}

// Every event reason the binder and the provisioner record is in the
// events list of docs/binder.md or docs/provisioner.md, and every reason
// those lists name is recorded.
func TestEventReasonsDocumented(t *testing.T) {
	r := root(t)
	for _, tc := range []struct{ cmd, doc string }{
		{"./cmd/binder", "docs/binder.md"},
		{"./cmd/provisioner", "docs/provisioner.md"},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			listed := DocReasons(read(t, filepath.Join(r, tc.doc)))
			if len(listed) == 0 {
				t.Fatalf("%s: no paragraph beginning with \"Events\" names a reason in backticks", tc.doc)
			}
			for _, p := range CompareReasons(tc.doc, listed, codeReasons(t, r, tc.cmd)) {
				t.Error(p)
			}
		})
	}
}

// docs/deploy.md's RBAC table is deploy/csi's rules, resource by
// resource, and its comparison with EP's rbac.yaml is EP's rules and
// tether's.
func TestRBACDocumented(t *testing.T) {
	r := root(t)
	yml, err := DeployGrants(r)
	if err != nil {
		t.Fatal(err)
	}
	md := read(t, filepath.Join(r, "docs/deploy.md"))
	doc, problems := DocGrants(md)
	problems = append(problems, CompareGrants(doc, yml)...)
	ep, err := RulesByResource(filepath.Join(r, "test/testdata/ep-v6.4.0/rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	problems = append(problems, CheckEPTable(md, ByResource(yml, "provisioner"), ep)...)
	for _, p := range problems {
		t.Error("docs/deploy.md: " + p)
	}
}
