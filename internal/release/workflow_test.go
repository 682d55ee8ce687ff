package release

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// WorkflowFile is the release pipeline GitHub Actions runs on a tag.
const WorkflowFile = ".github/workflows/release.yaml"

// workflow is what these tests read of a GitHub Actions workflow.
type workflow struct {
	Name        string                         `json:"name"`
	Concurrency any                            `json:"concurrency"`
	On          map[string]map[string][]string `json:"on"`
	// OnAsYAML11 is `on:` as YAML 1.1 reads it (the word is a boolean).
	OnAsYAML11  map[string]map[string][]string `json:"true"`
	Permissions map[string]string              `json:"permissions"`
	Jobs        map[string]workflowJob         `json:"jobs"`
}

type workflowJob struct {
	RunsOn         string            `json:"runs-on"`
	TimeoutMinutes int               `json:"timeout-minutes"`
	If             string            `json:"if"`
	Permissions    map[string]string `json:"permissions"`
	Env            map[string]string `json:"env"`
	Steps          []workflowStep    `json:"steps"`
}

type workflowStep struct {
	Name string            `json:"name"`
	ID   string            `json:"id"`
	If   string            `json:"if"`
	Uses string            `json:"uses"`
	Run  string            `json:"run"`
	With map[string]any    `json:"with"`
	Env  map[string]string `json:"env"`
}

func (s workflowStep) String() string {
	if s.Name != "" {
		return fmt.Sprintf("step %q", s.Name)
	}
	return "step " + s.Uses
}

// readWorkflow reads the release workflow and its one job.
func readWorkflow(t *testing.T) (raw string, w workflow, job workflowJob) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, WorkflowFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &w); err != nil {
		t.Fatalf("%s: %v", WorkflowFile, err)
	}
	if len(w.Jobs) != 1 {
		t.Fatalf("%s: %d jobs, want 1 (release)", WorkflowFile, len(w.Jobs))
	}
	return string(data), w, w.Jobs["release"]
}

// actionRef is a step's uses: owner/repo[/path]@ref and what follows.
var (
	actionRef = regexp.MustCompile(`^\s*-?\s*uses:\s*([\w.-]+/[\w./-]+)@(\S+)(.*)$`)
	commitSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)
	tagNote   = regexp.MustCompile(`^\s*# v\d+(\.\d+)*$`)
)

// pinProblems returns a problem for each action a workflow uses that is
// not pinned to a full commit, with the tag it is in a comment after it
// (`uses: actions/checkout@<40 hex> # v7.0.1`, as Dependabot keeps them).
func pinProblems(workflow string) []string {
	var problems []string
	for i, line := range strings.Split(workflow, "\n") {
		m := actionRef.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if !commitSHA.MatchString(m[2]) {
			problems = append(problems, fmt.Sprintf("line %d: %s@%s is not pinned to a commit", i+1, m[1], m[2]))
		} else if !tagNote.MatchString(m[3]) {
			problems = append(problems, fmt.Sprintf("line %d: %s@%s has no `# vX.Y.Z` comment naming its tag", i+1, m[1], m[2]))
		}
	}
	return problems
}

func TestPinProblems(t *testing.T) {
	sha := strings.Repeat("0a", 20)
	for _, tc := range []struct {
		line string
		want string // a fragment of the one problem; "" for none
	}{
		{"      - uses: actions/checkout@" + sha + " # v7.0.1", ""},
		{"        uses: actions/attest-build-provenance@" + sha + " # v4", ""},
		{"      - uses: actions/checkout@v7", "not pinned"},
		{"      - uses: actions/checkout@main # v7.0.1", "not pinned"},
		{"      - uses: actions/checkout@" + sha[:39] + " # v7.0.1", "not pinned"},
		{"      - uses: actions/checkout@" + sha, "no `# vX.Y.Z` comment"},
		{"      - uses: actions/checkout@" + sha + " # latest", "no `# vX.Y.Z` comment"},
		{"      - run: echo uses: nothing", ""},
	} {
		got := pinProblems("x\n" + tc.line + "\n")
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("%q: %q, want none", tc.line, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
			t.Errorf("%q: %q, want one saying %q", tc.line, got, tc.want)
		}
	}
}

// The release workflow runs on a version tag, asks for no permission but
// its job's four (the release page, the registry, the OIDC token of the
// keyless certificates, the attestations), pins every action to a commit,
// builds and checks the bundle with hack/release-check.sh before any step
// that uses the network, names the images where make release does, pushes
// with the bundle's own tether-push and opens the krew PR from the
// bundle's krew manifest.
func TestReleaseWorkflow(t *testing.T) {
	raw, w, job := readWorkflow(t)
	on := w.On
	if on == nil {
		on = w.OnAsYAML11
	}
	if tags := on["push"]["tags"]; !slices.Equal(tags, []string{"v*"}) || len(on) != 1 {
		t.Errorf("on: %v, want only a push of tags v*", on)
	}
	if w.Permissions == nil || len(w.Permissions) != 0 {
		t.Errorf("permissions: %v, want {} (each job says what it needs)", w.Permissions)
	}
	want := map[string]string{"contents": "write", "packages": "write", "id-token": "write", "attestations": "write"}
	if fmt.Sprint(job.Permissions) != fmt.Sprint(want) {
		t.Errorf("the job's permissions: %v, want %v", job.Permissions, want)
	}
	for _, p := range pinProblems(raw) {
		t.Errorf("%s: %s", WorkflowFile, p)
	}

	build := slices.IndexFunc(job.Steps, func(s workflowStep) bool { return s.ID == "build" })
	if build < 0 || job.Steps[build].Run != `hack/release-check.sh "$VERSION"` {
		t.Fatalf(`no step with id build running hack/release-check.sh "$VERSION" (the script CI runs)`)
	}
	for _, s := range job.Steps[:build] {
		if s.Run != "" || !(strings.HasPrefix(s.Uses, "actions/checkout@") || strings.HasPrefix(s.Uses, "actions/setup-go@")) {
			t.Errorf("%s comes before the build: only the checkout and Go do", s)
		}
	}
	if job.Env["VERSION"] != "${{ github.ref_name }}" || job.Env["BUNDLE"] != "_out/release/${{ github.ref_name }}" {
		t.Errorf("env VERSION %q, BUNDLE %q: want the tag and make release's folder of it", job.Env["VERSION"], job.Env["BUNDLE"])
	}
	// The registry make release names the images in (its IMAGE_REGISTRY,
	// read from the environment) is the one pushed to: tether.yaml's.
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	def := regexp.MustCompile(`(?m)^IMAGE_REGISTRY \?= (\S+)$`).FindSubmatch(makefile)
	if def == nil {
		t.Fatal("the Makefile sets no IMAGE_REGISTRY ?= default")
	}
	if job.Env["IMAGE_REGISTRY"] != string(def[1]) {
		t.Errorf("env IMAGE_REGISTRY %q, the Makefile's default %q: want the same", job.Env["IMAGE_REGISTRY"], def[1])
	}

	var runs, krew []string
	for _, s := range job.Steps {
		runs = append(runs, s.Run)
		if strings.HasPrefix(s.Uses, "rajatjindal/krew-release-bot@") {
			krew = append(krew, fmt.Sprint(s.With["krew_template_file"]))
		}
	}
	script := strings.Join(runs, "\n")
	for _, want := range []string{
		`"./tether-push_${VERSION}_linux_amd64" -registry "$IMAGE_REGISTRY"`,
		`"$BUNDLE/tether-${component}_${VERSION}.spdx.json"`,
		`gh release create "$VERSION" --verify-tag`,
	} {
		if !strings.Contains(script, want) {
			t.Errorf("no run: step has %s", want)
		}
	}
	// The names the steps build are the bundle's.
	if got := PushBinaryName("v1.2.3", PushPlatforms[0]); got != "tether-push_v1.2.3_linux_amd64" {
		t.Errorf("the linux/amd64 push binary is %s, the workflow runs tether-push_${VERSION}_linux_amd64", got)
	}
	if got := SBOMName("binder", "v1.2.3"); got != "tether-binder_v1.2.3.spdx.json" {
		t.Errorf("the binder's SBOM is %s, the workflow attests tether-${component}_${VERSION}.spdx.json", got)
	}
	if !slices.Equal(krew, []string{"${{ env.BUNDLE }}/" + KrewManifestFile}) {
		t.Errorf("krew-release-bot's templates %q, want the bundle's %s", krew, KrewManifestFile)
	}
}
