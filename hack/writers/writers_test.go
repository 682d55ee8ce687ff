package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// found runs checkFile on src as path and returns its writes as
// "line kind method".
func found(t *testing.T, path, src string) []string {
	t.Helper()
	ws, err := checkFile(path, src)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%d %s %s", w.line, w.kind, w.method))
	}
	return out
}

const writes = `package p

type wrapper struct {
	typedcorev1.PersistentVolumeInterface
	hooks int
}

type holder struct {
	claims typedcorev1.PersistentVolumeClaimInterface
}

func direct(c kubernetes.Interface) {
	c.CoreV1().PersistentVolumeClaims("ns").Update(ctx, claim, opts)
	c.CoreV1().PersistentVolumes().Delete(ctx, "pv", opts)
}

func throughVariables(c kubernetes.Interface) {
	claims := c.CoreV1().PersistentVolumeClaims(ns)
	again := claims
	var volumes = c.CoreV1().PersistentVolumes()
	claims.UpdateStatus(ctx, claim, opts)
	again.Patch(ctx, "c", types.MergePatchType, data, opts)
	volumes.Apply(ctx, cfg, opts)
	go func() { volumes.ApplyStatus(ctx, cfg, opts) }()
}

func typed(v typedcorev1.PersistentVolumeInterface, h holder) {
	v.Create(ctx, pv, opts)
	h.claims.DeleteCollection(ctx, opts, list)
}

func (w wrapper) Update(pv *v1.PersistentVolume) {
	w.Patch(ctx, pv.Name, types.MergePatchType, data, opts)
	w.PersistentVolumeInterface.Update(ctx, pv, opts)
}
`

func TestWritesFound(t *testing.T) {
	got := found(t, "pkg/p/w.go", writes)
	want := []string{
		"13 pvc Update", "14 pv Delete",
		"21 pvc UpdateStatus", "22 pvc Patch", "23 pv Apply", "24 pv ApplyStatus",
		"28 pv Create", "29 pvc DeleteCollection",
		"33 pv Patch", "34 pv Update",
	}
	if !slices.Equal(got, want) {
		t.Errorf("writes:\n got %q\nwant %q", got, want)
	}
}

// Reads, listers, informers and other objects' writes are no writes.
const reads = `package p

func reads(c kubernetes.Interface, f informers.SharedInformerFactory, l corelisters.PersistentVolumeClaimLister) {
	c.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "c", opts)
	c.CoreV1().PersistentVolumes().List(ctx, opts)
	l.PersistentVolumeClaims("ns").Get("c")
	f.Core().V1().PersistentVolumes().Informer()
	c.CoreV1().Pods("ns").Delete(ctx, "p", opts)
	c.StorageV1().VolumeAttachments().Update(ctx, va, opts)
	claims := c.CoreV1().ConfigMaps("ns")
	claims.Update(ctx, cm, opts)
	store.Delete(obj)
	queue.Add(key)
}

func other() {
	claims.Update(ctx, x) // claims of another function: not seen
}
`

func TestReadsNotFound(t *testing.T) {
	if got := found(t, "pkg/p/r.go", reads); len(got) > 0 {
		t.Errorf("reads taken for writes: %q", got)
	}
}

const badFile = `package b

func sneak(c kubernetes.Interface) {
	c.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "c", opts)
}
`

func TestJudge(t *testing.T) {
	allow, err := parseAllow(`
# comment
pvc pkg/a/writer.go   # the writer
pv  pkg/a/writer.go
pv  pkg/c/volumes.go
`)
	if err != nil {
		t.Fatal(err)
	}
	good, err := checkFile("pkg/a/writer.go", badFile)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := checkFile("pkg/b/sneak.go", badFile)
	if err != nil {
		t.Fatal(err)
	}
	exists := func(string) bool { return true }
	if got := judge(good, allow, exists); len(got) > 0 {
		t.Errorf("an allowed file's write reported: %q", got)
	}
	got := judge(bad, allow, exists)
	want := []string{"pkg/b/sneak.go:4: writes a PersistentVolumeClaim (Delete); only these files may: pkg/a/writer.go"}
	if !slices.Equal(got, want) {
		t.Errorf("a bad file's write:\n got %q\nwant %q", got, want)
	}
	// Allowed for claims only: its PV write is reported, with the PV writers.
	pvWrite := []write{{file: "pkg/a/claims.go", line: 7, kind: kindVolume, method: "Patch"}}
	allow[kindClaim] = append(allow[kindClaim], "pkg/a/claims.go")
	got = judge(pvWrite, allow, exists)
	want = []string{"pkg/a/claims.go:7: writes a PersistentVolume (Patch); only these files may: pkg/a/writer.go, pkg/c/volumes.go"}
	if !slices.Equal(got, want) {
		t.Errorf("a write of the other kind:\n got %q\nwant %q", got, want)
	}
	// An entry whose file is gone.
	got = judge(nil, allowList{kindVolume: {"pkg/gone.go"}}, func(string) bool { return false })
	want = []string{"allow-list: pv pkg/gone.go: no such file (moved? move its entry)"}
	if !slices.Equal(got, want) {
		t.Errorf("a stale entry:\n got %q\nwant %q", got, want)
	}
}

func TestParseAllowRefuses(t *testing.T) {
	for _, text := range []string{
		"pvc",                          // no file
		"pvc a.go b.go",                // two files
		"pod a.go",                     // unknown kind
		"pv a.go\npv a.go",             // twice
		"pvc pkg/a.go extra # comment", // extra field
	} {
		if _, err := parseAllow(text); err == nil {
			t.Errorf("%q: accepted", text)
		}
	}
}

// The repository's allow-list parses.
func TestAllowFileParses(t *testing.T) {
	data, err := os.ReadFile("allow.txt")
	if err != nil {
		t.Fatal(err)
	}
	allow, err := parseAllow(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(allow[kindClaim]) == 0 || len(allow[kindVolume]) == 0 {
		t.Errorf("allow.txt lists no writer of a kind: %v", allow)
	}
}

// scan walks the directories: test files and testdata are not checked.
func TestScan(t *testing.T) {
	dir := t.TempDir()
	for path, src := range map[string]string{
		"pkg/b/sneak.go":            badFile,
		"pkg/b/sneak_test.go":       badFile,
		"pkg/b/testdata/fixture.go": badFile,
		"pkg/b/notes.txt":           badFile,
	} {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	ws, err := scan([]string{"pkg"})
	if err != nil {
		t.Fatal(err)
	}
	want := []write{{file: "pkg/b/sneak.go", line: 4, kind: kindClaim, method: "Delete"}}
	if !slices.Equal(ws, want) {
		t.Errorf("scan: got %+v, want %+v", ws, want)
	}
}
