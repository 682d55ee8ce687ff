package doccheck

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestDocAnnotations(t *testing.T) {
	md := "`pv.kubernetes.io/bind-completed: \"yes\"` and `tether.dev/owner`=x\n" +
		"```\n`volume.kubernetes.io/in-a-fence`\n```\n" +
		"`provisioner.tether.dev/in-flight-volume`, `volume.kubernetes.io/controller-modify-secret-*`\n" +
		"not: `kubernetes.io/hostname`, `k8s.io/kubernetes`, `registry.k8s.io/x`, https://kubernetes.io/docs/x, `kubernetes.io/csi:<driver>`\n" +
		"`node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`\n"
	want := []Ref{
		{Name: "pv.kubernetes.io/bind-completed", Line: 1},
		{Name: "tether.dev/owner", Line: 1},
		{Name: "provisioner.tether.dev/in-flight-volume", Line: 5},
		{Name: "volume.kubernetes.io/controller-modify-secret-", Line: 5, Prefix: true},
		{Name: "node.kubernetes.io/out-of-service", Line: 7},
	}
	if got := DocAnnotations(md); !slices.Equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestCheckAnnotations(t *testing.T) {
	code := map[string]bool{"pv.kubernetes.io/bind-completed": true, "volume.kubernetes.io/controller-modify-secret-name": true}
	for _, tc := range []struct {
		name string
		ref  Ref
		want []string
	}{
		{"a constant", Ref{Name: "pv.kubernetes.io/bind-completed", Line: 1}, nil},
		{"a prefix", Ref{Name: "volume.kubernetes.io/controller-modify-secret-", Line: 1, Prefix: true}, nil},
		{"misspelt", Ref{Name: "pv.kubernetes.io/bind-complete", Line: 2}, []string{"d.md:2: pv.kubernetes.io/bind-complete is in no constant of the code: a name it does not use, or misspelt"}},
		{"an unknown prefix", Ref{Name: "volume.kubernetes.io/x-", Line: 3, Prefix: true}, []string{"d.md:3: volume.kubernetes.io/x- is in no constant of the code: a name it does not use, or misspelt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckAnnotations("d.md", []Ref{tc.ref}, code); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// annotationSources are the packages whose constants name the
// annotations, labels, finalizers and taints tether reads and writes:
// its own, and the Kubernetes libraries it takes them from.
var annotationSources = []string{
	modulePrefix, libraryPrefix,
	"k8s.io/api/core/v1", "k8s.io/api/storage/", "k8s.io/component-helpers/storage/",
	"k8s.io/csi-translation-lib", "github.com/kubernetes-csi/",
}

// foreignAnnotations are names the docs give that belong to components
// tether neither is nor imports, each with its owner.
var foreignAnnotations = map[string]string{
	"snapshot.storage.kubernetes.io/managed-by": "external-snapshotter's distributed snapshotting",
	"pod-security.kubernetes.io/enforce":        "Pod Security Admission",
}

// Every *.kubernetes.io/ and tether.dev annotation (or label, finalizer,
// taint key) the Markdown names in code spans is a constant of tether's
// code or of the libraries it imports, or a string tether's own code
// (examples/ and the test harnesses included) writes, or one of
// foreignAnnotations.
// codeAnnotations are the strings TestAnnotationsExist accepts.
func codeAnnotations(t *testing.T, r string) map[string]bool {
	t.Helper()
	var dirs []string
	for _, cmd := range []string{"./cmd/binder", "./cmd/provisioner", "./cmd/kubectl-tether", "./examples/local-driver"} {
		d, err := deps(r, cmd, annotationSources...)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d...)
	}
	slices.Sort(dirs)
	var files []string
	for _, d := range slices.Compact(dirs) {
		f, err := goFiles(d)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f...)
	}
	code, err := CodeStrings(files, false)
	if err != nil {
		t.Fatal(err)
	}
	ownFiles := goSources(t, r, "cmd", "pkg", "internal", "examples", "hack")
	for _, f := range repoFiles(t, r, []string{"test"}, ".go") { // the harnesses are tests too
		ownFiles = append(ownFiles, filepath.Join(r, f))
	}
	own, err := CodeStrings(ownFiles, true)
	if err != nil {
		t.Fatal(err)
	}
	for s := range own {
		code[s] = true
	}
	for s := range foreignAnnotations {
		code[s] = true
	}
	return code
}

func TestAnnotationsExist(t *testing.T) {
	r := root(t)
	code := codeAnnotations(t, r)
	for _, p := range markdownFiles(t, r) {
		for _, problem := range CheckAnnotations(p, DocAnnotations(read(t, filepath.Join(r, p))), code) {
			t.Error(problem)
		}
	}
}
