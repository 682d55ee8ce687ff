package doccheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mutate replaces old by new in s once, failing t when s has no old (the
// document changed: the mutation must be written anew).
func mutate(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("the document no longer has %q: update the mutation", old)
	}
	return strings.Replace(s, old, new, 1)
}

// wantProblem fails t unless a problem contains want.
func wantProblem(t *testing.T, problems []string, want string) {
	t.Helper()
	for _, p := range problems {
		if strings.Contains(p, want) {
			return
		}
	}
	t.Errorf("no problem says %q; got %q", want, problems)
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Threat model: who may write what":                                            "threat-model-who-may-write-what",
		"Static binding, 1000 pairs (`make bench-binder`, BENCH_N=1000 BENCH_RUNS=3)": "static-binding-1000-pairs-make-bench-binder-bench_n1000-bench_runs3",
		"`make images`":                      "make-images",
		"What's new?":                        "whats-new",
		"A  B":                               "a--b",
		"**Bold** _em_ text":                 "bold-em-text",
		"[Linked](x.md) heading":             "linked-heading",
		"Ünïcode stays":                      "ünïcode-stays",
		"The binder: flags, events, metrics": "the-binder-flags-events-metrics",
		"snake_case_name":                    "snake_case_name",
		"1. Numbered":                        "1-numbered",
	} {
		if got := Slug(headingText(heading)); got != want {
			t.Errorf("%q: %q, want %q", heading, got, want)
		}
	}
}

func TestAnchorsDuplicates(t *testing.T) {
	a := Anchors("# A\n\n## A\n\n```\n# not a heading\n```\n\n### A\n\nSetext\n------\n\n<a name=\"here\"></a>\n")
	for _, want := range []string{"a", "a-1", "a-2", "setext", "here"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
	if a["a-3"] || a["not-a-heading"] {
		t.Errorf("too many anchors: %v", a)
	}
}

// Each broken link is found, in the repository's own documents mutated.
func TestLinksMutated(t *testing.T) {
	r := root(t)
	readme := read(t, filepath.Join(r, "README.md"))
	prov := read(t, filepath.Join(r, "docs/provisioner.md"))
	for _, tc := range []struct {
		name, doc, old, new, want string
	}{
		{"a missing file", "README.md", "(docs/deploy.md)", "(docs/deploy2.md)", "README.md:"},
		{"a missing anchor", "docs/provisioner.md", "design.md#threat-model-who-may-write-what", "design.md#threat-model", "no heading has the anchor #threat-model"},
		{"an anchor in the same file", "README.md", "\n## ", "\nSee [below](#no-such-section).\n\n## ", "#no-such-section"},
		{"a capital in an anchor", "docs/provisioner.md", "design.md#threat-model-who-may-write-what", "design.md#Threat-model-who-may-write-what", "#Threat-model"},
		{"outside the repository", "README.md", "(docs/deploy.md)", "(../deploy.md)", "outside the repository"},
		{"an absolute path", "README.md", "(docs/deploy.md)", "(/docs/deploy.md)", "an absolute path"},
		{"an anchor into a file that is not Markdown", "README.md", "(docs/deploy.md)", "(Makefile#test)", "not Markdown"},
		{"a reference definition", "README.md", "\n## ", "\n[ref]: docs/nothing.md\n\n## ", "docs/nothing.md"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := map[string]string{"README.md": readme, "docs/provisioner.md": prov}[tc.doc]
			problems := checkLinks(r, []string{tc.doc}, map[string]string{tc.doc: mutate(t, src, tc.old, tc.new)})
			wantProblem(t, problems, tc.want)
		})
	}
	// What must not be reported: a line anchor, a link in code, a web link.
	ok := "[a](Makefile#L10) `[b](missing.md)` [c](https://example.com/x.md#y) [d](#top)\n\n# Top\n"
	if p := checkLinks(r, []string{"README.md"}, map[string]string{"README.md": ok}); len(p) != 0 {
		t.Errorf("reported: %q", p)
	}
}

// A reason left out of the docs, and one the code does not record, are
// found in the repository's own documents mutated.
func TestEventReasonsMutated(t *testing.T) {
	r := root(t)
	recorded := map[string]map[string]string{
		"docs/binder.md":      codeReasons(t, r, "./cmd/binder"),
		"docs/provisioner.md": codeReasons(t, r, "./cmd/provisioner"),
	}
	for _, tc := range []struct {
		name, doc, old, new, want string
	}{
		{"a binder reason left out", "docs/binder.md", "`ClaimMisbound`, ", "", "the event reason ClaimMisbound"},
		{"a provisioner reason left out", "docs/provisioner.md", "`OrphanVolume`", "OrphanVolume", "the event reason OrphanVolume"},
		{"a library reason left out", "docs/provisioner.md", "`ProvisioningSucceeded`, ", "", "the event reason ProvisioningSucceeded"},
		{"a reason the code does not record", "docs/provisioner.md", "`VolumeDelete`", "`VolumeDeleted`", "names VolumeDeleted, which the code never records"},
		{"the binder's reason in the provisioner's list", "docs/provisioner.md", "`Provisioning`,", "`Provisioning`, `ExternalProvisioning`,", "names ExternalProvisioning"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := mutate(t, read(t, filepath.Join(r, tc.doc)), tc.old, tc.new)
			wantProblem(t, CompareReasons(tc.doc, DocReasons(doc), recorded[tc.doc]), tc.want)
		})
	}
}

// How reasons are read from Go source: Reason* constants of a Consts
// package, literal and constant reasons of Event calls, not other
// arguments.
func TestCodeReasons(t *testing.T) {
	dir := t.TempDir()
	src := `package p

const (
	ReasonA = "A"
	other   = "NotAReason"
	reasonB = "B"
)

func f(r recorder, e struct{ Reason string }) {
	r.Event(nil, "Normal", "C", "m")
	r.Eventf(nil, "Warning", reasonB, "m %d", 1)
	r.AnnotatedEventf(nil, nil, "Normal", "D", "m")
	r.Event(nil, "Normal", e.Reason, "m")
	r.Event(nil, "Normal", other+"x", "m")
}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\nconst ReasonTest = \"T\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, consts := range []bool{true, false} {
		got, err := CodeReasons([]Source{{Dir: dir, Consts: consts}})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"B", "C", "D"}
		if consts {
			want = []string{"A", "B", "C", "D"}
		}
		var names []string
		for r := range got {
			names = append(names, r)
		}
		slices.Sort(names)
		if !slices.Equal(names, want) {
			t.Errorf("consts %v: %v, want %v", consts, names, want)
		}
	}
	listed := DocReasons("# x\n\nEvents: `Aa`, `Bb`\nand `Cc` (see `pkg/x.Y`, `snake_case`, `--flag`).\n\nNot events: `Dd`.\n\n| `Ee` |\n")
	if len(listed) != 3 || listed["Aa"] != 3 || listed["Bb"] != 3 || listed["Cc"] != 4 {
		t.Errorf("listed %v, want Aa, Bb (line 3) and Cc (line 4)", listed)
	}
}

// Each RBAC drift is found: the repository's docs/deploy.md mutated, and
// deploy/csi's grants changed.
func TestRBACMutated(t *testing.T) {
	r := root(t)
	md := read(t, filepath.Join(r, "docs/deploy.md"))
	yml, err := DeployGrants(r)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := RulesByResource(filepath.Join(r, "test/testdata/ep-v6.4.0/rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(md string, yml Grants) []string {
		doc, problems := DocGrants(md)
		problems = append(problems, CompareGrants(doc, yml)...)
		return append(problems, CheckEPTable(md, ByResource(yml, "provisioner"), ep)...)
	}
	if p := check(md, yml); len(p) != 0 {
		t.Fatalf("unmutated: %q", p)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"a verb left out", "| binder | events | create, patch |", "| binder | events | create |", "binder events: docs/deploy.md says create, deploy/csi grants create, patch"},
		{"a verb too many", "| binder | persistentvolumes/status | update, patch |", "| binder | persistentvolumes/status | update, patch, delete |", "binder persistentvolumes/status"},
		{"a row left out", "| provisioner | csidrivers | get |", "| provisioner | storageclasses | list, watch |", "deploy/csi grants provisioner csidrivers get"},
		{"the wrong scope", "| binder | leases (its namespace) |", "| binder | leases |", "binder leases (its namespace)"},
		{"per-resource verbs", "get/create/update; list/create/update/delete", "get/create/update; list/create/update", "provisioner csistoragecapacities (its namespace)"},
		{"per-resource verbs without a ;", "get/create/update; list/create/update/delete", "get/create/update", "the verbs cell goes on with \"get/create/update\""},
		{"per-resource verbs miscounted", "get/create/update; list/create/update/delete", "get/create/update; list; get", "2 resources but 3 verb lists"},
		{"an opt-in made default", "| provisioner | secrets | get, only with `deploy/csi/components/provisioner-secrets`", "| provisioner | secrets | get, only with provisioner-secrets", "the verbs cell goes on with"},
		{"EP's column", "| events | create, patch | list, watch, create, update, patch |", "| events | create, patch | list, watch, create, patch |", "events: EP's column says [create list patch watch]"},
		{"tether's column", "list, watch; get on nodes", "list, watch", "nodes: tether's column says [list watch], deploy/csi grants [get list watch]"},
		{"EP's missing rule", "| csidrivers | get, only when", "| csidrivers | get, list, only when", "csidrivers: tether's column"},
		{"an EP row left out", "| namespaces (`kube-system`) |", "| namespaces2 |", "the EP comparison has no row for it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, check(mutate(t, md, tc.old, tc.new), yml), tc.want)
		})
	}
	t.Run("a verb granted in deploy/csi only", func(t *testing.T) {
		changed := Grants{}
		for g, v := range yml {
			changed[g] = slices.Clone(v)
		}
		changed.add(Grant{"provisioner", "nodes", false, "base"}, "delete")
		wantProblem(t, check(md, changed), "provisioner nodes: docs/deploy.md says get, list, watch, deploy/csi grants delete, get, list, watch")
	})
}

func TestYAMLGrants(t *testing.T) {
	f := filepath.Join(t.TempDir(), "rbac.yaml")
	yml := `# a comment
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: c
rules:
  - apiGroups: [""]
    resources: ["pods", "nodes"]
    verbs: ["get", "list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: b
  namespace: ns
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: c}
subjects: [{kind: ServiceAccount, name: tether-x, namespace: ns}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: b2
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: c}
subjects: [{kind: ServiceAccount, name: tether-y, namespace: ns}]
`
	if err := os.WriteFile(f, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := YAMLGrants("base", f)
	if err != nil {
		t.Fatal(err)
	}
	want := Grants{
		{"x", "pods", true, "base"}: {"get", "list"}, {"x", "nodes", true, "base"}: {"get", "list"},
		{"y", "pods", false, "base"}: {"get", "list"}, {"y", "nodes", false, "base"}: {"get", "list"},
	}
	if p := CompareGrants(g, want); len(p) != 0 {
		t.Errorf("%q", p)
	}
}

// A link whose text runs over two lines is read, on the line it starts;
// one in a code span or a code block is not.
func TestLinksOverLines(t *testing.T) {
	got := Links("# T\n\nSee [the\nthreat model](design.md#x) and `[no](a.md)`\nor [img](\n\n```\n[no](b.md)\n```\n[ref]: c.md\n")
	want := []Link{{3, "design.md#x"}, {10, "c.md"}}
	if !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}
