package release

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// BundleEnv names the release folder TestReleaseWorkflowSteps runs the
// workflow's steps on; hack/release-check.sh sets it to the bundle it has
// just built and checked.
const BundleEnv = "TETHER_RELEASE_BUNDLE"

// expression is a GitHub Actions expression, ${{ ... }}.
var expression = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// expand replaces each expression of s by its value in vals (a context
// path such as github.ref_name or steps.images.outputs.x); one that vals
// lacks is an error: the test does not evaluate what it does not know.
func expand(s string, vals map[string]string) (string, error) {
	var missing []string
	out := expression.ReplaceAllStringFunc(s, func(m string) string {
		key := expression.FindStringSubmatch(m)[1]
		v, ok := vals[key]
		if !ok {
			missing = append(missing, key)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%q: no value for %q here", s, missing)
	}
	return out, nil
}

func TestExpand(t *testing.T) {
	vals := map[string]string{"github.ref_name": "v1.2.3", "env.BUNDLE": "_out/release/v1.2.3"}
	for _, tc := range []struct{ in, want, err string }{
		{"_out/release/${{ github.ref_name }}", "_out/release/v1.2.3", ""},
		{"${{env.BUNDLE}}/*", "_out/release/v1.2.3/*", ""},
		{"no expression", "no expression", ""},
		{"${{ !contains(github.ref_name, '-') }}", "", "no value"},
	} {
		got, err := expand(tc.in, vals)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("expand(%q) = %q, %v; want %q, error %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// stub records each call of a program the workflow reaches the network
// with, one line per call: its name and arguments separated by \x1f, and
// what it read on stdin for docker (the password). cosign's --bundle
// file is written, as cosign sign-blob writes it.
const stub = `#!/usr/bin/env bash
set -eu
name=$(basename "$0")
stdin=
if [ "$name" = docker ]; then stdin=$(cat); fi
{ printf '%s' "$name"; printf '\037%s' "$@"; printf '\037stdin=%s\n' "$stdin"; } >>"$STUB_LOG"
while [ $# -gt 0 ]; do
  if [ "$1" = --bundle ]; then echo '{}' >"$2"; fi
  shift
done
`

// TestReleaseWorkflowSteps runs the release workflow's steps after its
// build (hack/release-check.sh, the script that runs this test) on the
// bundle $TETHER_RELEASE_BUNDLE, as the runner would: each run: step in
// bash -eo pipefail in a workspace holding the bundle at
// _out/release/<version>, with the job's env and GITHUB_OUTPUT. What
// needs the network or GitHub's OIDC token is not run: cosign, docker and
// gh are stubs that record their arguments, and the uses: steps
// (cosign-installer, attest-build-provenance, krew-release-bot) are not
// run; their inputs are checked. The bundle's tether-push runs for real,
// to a registry on loopback. Then: the registry serves every digest
// images.json pins, each was signed (and its platforms, --recursive) and
// given its own SBOM as an attestation, SHA256SUMS and the provenance
// were signed, and the release uploads every file of the folder.
func TestReleaseWorkflowSteps(t *testing.T) {
	bundle := os.Getenv(BundleEnv)
	if bundle == "" {
		t.Skip("runs on a built bundle: hack/release-check.sh runs it with " + BundleEnv + "=<folder>")
	}
	if runtime.GOOS+"/"+runtime.GOARCH != "linux/amd64" {
		t.Skip("the workflow runs the bundle's linux/amd64 tether-push, as GitHub's ubuntu runner is")
	}
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatal("the workflow's steps use jq (on GitHub's runners; apt-get install jq here)")
	}
	_, _, job := readWorkflow(t)
	version := filepath.Base(bundle)
	built, err := ReadBuilt(bundle)
	if err != nil {
		t.Fatal(err)
	}

	ws, home, stubs := t.TempDir(), t.TempDir(), t.TempDir()
	dir := filepath.Join(ws, "_out", "release", version)
	linkTree(t, bundle, dir)
	for _, name := range []string{"cosign", "docker", "gh"} {
		if err := os.WriteFile(filepath.Join(stubs, name), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	logFile := filepath.Join(t.TempDir(), "calls")
	registry := testRegistry(t, nil) + "/tether-csi"

	vals := map[string]string{
		"github.ref_name":      version,
		"github.ref":           "refs/tags/" + version,
		"github.repository":    "tether-csi/tether",
		"secrets.GITHUB_TOKEN": "test-token",
	}
	env := []string{"PATH=" + stubs + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home,
		"STUB_LOG=" + logFile, "GITHUB_ACTOR=release-test", "GITHUB_REF_NAME=" + version,
		"GITHUB_REPOSITORY=tether-csi/tether", "GITHUB_WORKSPACE=" + ws}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "PATH" && k != "HOME" && k != "DOCKER_CONFIG" && !strings.HasPrefix(k, "GITHUB_") {
			env = append(env, kv)
		}
	}
	for k, v := range job.Env {
		if k == "IMAGE_REGISTRY" {
			v = registry // here, the registry on loopback
		}
		if v, err = expand(v, vals); err != nil {
			t.Fatal(err)
		}
		vals["env."+k] = v
		env = append(env, k+"="+v)
	}

	build := slices.IndexFunc(job.Steps, func(s workflowStep) bool { return s.ID == "build" })
	if build < 0 {
		t.Fatal("no step with id build")
	}
	for i, s := range job.Steps[build+1:] {
		if s.Uses != "" {
			checkUses(t, s, vals, ws, built)
			continue
		}
		if s.If != "" {
			t.Fatalf("%s: a run: step with if: %q, which this test does not evaluate", s, s.If)
		}
		out := filepath.Join(t.TempDir(), "output")
		stepEnv := append(slices.Clone(env), "GITHUB_OUTPUT="+out)
		for k, v := range s.Env {
			if v, err = expand(v, vals); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			stepEnv = append(stepEnv, k+"="+v)
		}
		script := filepath.Join(t.TempDir(), fmt.Sprintf("step-%d.sh", i))
		if err := os.WriteFile(script, []byte(s.Run), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), "bash", "--noprofile", "--norc", "-eo", "pipefail", script)
		cmd.Dir, cmd.Env = ws, stepEnv
		output, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n--- script\n%s\n--- output\n%s", s, err, s.Run, output)
		}
		t.Logf("%s ran:\n%s", s, output)
		if s.ID != "" {
			readOutputs(t, out, "steps."+s.ID+".outputs.", vals)
		}
	}

	calls := readCalls(t, logFile)
	want := map[string]bool{}
	for _, b := range built {
		ref := registry + "/" + b.Component
		if got := served(t, ref+":"+version); got != b.Digest {
			t.Errorf("the registry serves %s:%s as %q, images.json pins %s", ref, version, got, b.Digest)
		}
		sbom := filepath.Join("_out", "release", version, SBOMName(b.Component, version))
		want["cosign sign --yes --recursive "+ref+"@"+b.Digest] = true
		want["cosign attest --yes --type spdxjson --predicate "+sbom+" "+ref+"@"+b.Digest] = true
		if data, err := os.ReadFile(filepath.Join(ws, sbom)); err != nil || !strings.Contains(string(data), strings.TrimPrefix(b.Digest, "sha256:")) {
			t.Errorf("%s: %v, or it does not name the index %s", sbom, err, b.Digest)
		}
	}
	for _, f := range []string{"SHA256SUMS", ProvenanceFile} {
		p := filepath.Join("_out", "release", version, f)
		want["cosign sign-blob --yes --bundle "+p+".sigstore.json "+p] = true
	}
	host, _, _ := strings.Cut(registry, "/")
	want["docker login "+host+" --username release-test --password-stdin stdin=test-token"] = true
	var release []string
	for _, c := range calls {
		if strings.HasPrefix(c, "gh release create ") {
			release = append(release, c)
			continue
		}
		if !want[c] {
			t.Errorf("an unexpected call: %s", c)
		}
		delete(want, c)
	}
	for c := range want {
		t.Errorf("no call %s", c)
	}

	// The release: every file of the folder (with the signatures), the
	// notes, a pre-release for a version with a pre-release part.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	head := "gh release create " + version + " --verify-tag"
	if strings.Contains(version, "-") {
		head += " --prerelease"
	}
	head += " --title tether " + version + " --notes-file _out/release/" + version + "/RELEASE_NOTES.md"
	for _, e := range entries {
		head += " _out/release/" + version + "/" + e.Name()
	}
	if len(release) != 1 || release[0] != head {
		t.Errorf("gh release create calls:\n%s\nwant one:\n%s", strings.Join(release, "\n"), head)
	}
	for _, f := range []string{"SHA256SUMS.sigstore.json", ProvenanceFile + ".sigstore.json", ManifestsFile(registry)} {
		if !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == f }) {
			t.Errorf("the folder has no %s after the steps", f)
		}
	}
}

// checkUses checks the inputs of a step that uses an action, which the
// test does not run (each needs GitHub: its OIDC token or its API).
func checkUses(t *testing.T, s workflowStep, vals map[string]string, ws string, built []Built) {
	t.Helper()
	with := map[string]string{}
	for k, v := range s.With {
		e, err := expand(fmt.Sprint(v), vals)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		with[k] = e
	}
	action, _, _ := strings.Cut(s.Uses, "@")
	switch action {
	case "actions/attest-build-provenance":
		if p := with["subject-path"]; p != "" {
			matches, err := filepath.Glob(filepath.Join(ws, p))
			sums, _ := os.ReadFile(filepath.Join(ws, filepath.Dir(p), "SHA256SUMS"))
			if err != nil || len(matches) < strings.Count(string(sums), "\n")+2 {
				t.Errorf("%s: subject-path %s matches %d files (%v), want SHA256SUMS's, it and the provenance", s, p, len(matches), err)
			}
			break
		}
		i := slices.IndexFunc(built, func(b Built) bool {
			return with["subject-name"] == vals["env.IMAGE_REGISTRY"]+"/"+b.Component
		})
		if i < 0 || with["subject-digest"] != built[i].Digest || with["push-to-registry"] != "true" {
			t.Errorf("%s: subject %s@%s (push-to-registry %s), want an image of images.json, its digest, pushed",
				s, with["subject-name"], with["subject-digest"], with["push-to-registry"])
		}
	case "rajatjindal/krew-release-bot":
		data, err := os.ReadFile(filepath.Join(ws, with["krew_template_file"]))
		if err != nil || strings.Contains(string(data), "{{") {
			t.Errorf("%s: krew_template_file %s: %v, or it holds {{ (krew-release-bot renders it as a template)", s, with["krew_template_file"], err)
		}
	}
	t.Logf("%s not run here (it needs GitHub); inputs %v", s, with)
}

// linkTree makes dst hold src's files, hard-linked (copied if they
// cannot be).
func linkTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if os.Link(from, to) == nil {
			continue
		}
		if err := copyFile(from, to); err != nil {
			t.Fatal(err)
		}
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, st.Mode())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// readOutputs adds a step's GITHUB_OUTPUT lines (name=value) to vals.
func readOutputs(t *testing.T, file, prefix string, vals map[string]string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("GITHUB_OUTPUT line %q", line)
		}
		vals[prefix+k] = v
	}
}

// readCalls reads the stubs' log: each call as its words joined by spaces.
func readCalls(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var calls []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		words := strings.Split(sc.Text(), "\x1f")
		if words[len(words)-1] == "stdin=" {
			words = words[:len(words)-1]
		}
		calls = append(calls, strings.Join(words, " "))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return calls
}
