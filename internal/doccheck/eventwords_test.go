package doccheck

import (
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

func TestEventWords(t *testing.T) {
	md := "A `ProvisioningFailed` event, a `Warning` `OrphanVolume`.\n" +
		"`NotNearAnything` here.\n\n" +
		"Events: `FailedBinding`,\n`VolumeMismatch` and `PVC`.\n\n" +
		"```\nevent `InAFence`\n```\n"
	want := []Ref{
		{Name: "ProvisioningFailed", Line: 1}, {Name: "OrphanVolume", Line: 1},
		{Name: "FailedBinding", Line: 4}, {Name: "VolumeMismatch", Line: 5},
	}
	if got := EventWords(md); !slices.Equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestCheckEventWords(t *testing.T) {
	reasons := map[string]bool{"ProvisioningFailed": true}
	declared := map[string]bool{"CloneProtection": true}
	others := map[string]string{"FailedScheduling": "kube-scheduler"}
	refs := []Ref{{Name: "ProvisioningFailed", Line: 1}, {Name: "CloneProtection", Line: 2}, {Name: "FailedScheduling", Line: 3}, {Name: "ProvisioningFailled", Line: 4}}
	want := []string{"d.md:4: ProvisioningFailled is no event reason the code records (nor a name it declares)"}
	if got := CheckEventWords("d.md", refs, reasons, declared, others); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// otherEventWords are the words in backticks near "event" in the docs
// that are other components' reasons or names, with whose.
var otherEventWords = map[string]string{
	"FailedScheduling": "kube-scheduler's event reason",
	"PodScheduled":     "a pod condition",
}

// Every CamelCase word in backticks on a line of the Markdown that
// speaks of events is a reason the binder or the provisioner records,
// or a name tether's code or the provisioner library declares, or one
// of otherEventWords.
// eventSets are the reasons the binder and the provisioner record, and
// the names tether's code and the provisioner library declare, with the
// alerts of deploy/monitoring's rule files (a line may name an alert
// beside the events it fires on).
func eventSets(t *testing.T, r string) (reasons, declared map[string]bool) {
	t.Helper()
	reasons = map[string]bool{}
	for _, cmd := range []string{"./cmd/binder", "./cmd/provisioner"} {
		for reason := range codeReasons(t, r, cmd) {
			reasons[reason] = true
		}
	}
	lib, err := deps(r, "./cmd/provisioner", libraryPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range repoFiles(t, r, []string{"cmd", "pkg", "internal", "examples", "hack", "test"}, ".go") {
		files = append(files, filepath.Join(r, f))
	}
	for _, d := range lib {
		f, err := goFiles(d)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f...)
	}
	declared, err = DeclaredNames(files)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range repoFiles(t, r, []string{"deploy/monitoring"}, ".yaml") {
		for _, m := range alertName.FindAllStringSubmatch(read(t, filepath.Join(r, f)), -1) {
			declared[m[1]] = true
		}
	}
	return reasons, declared
}

// alertName finds a Prometheus rule's alert name.
var alertName = regexp.MustCompile(`(?m)^\s*-?\s*alert:\s*(\w+)`)

func TestEventWordsRecorded(t *testing.T) {
	r := root(t)
	reasons, declared := eventSets(t, r)
	for _, p := range markdownFiles(t, r) {
		for _, problem := range CheckEventWords(p, EventWords(read(t, filepath.Join(r, p))), reasons, declared, otherEventWords) {
			t.Error(problem)
		}
	}
}
