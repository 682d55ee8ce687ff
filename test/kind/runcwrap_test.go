package kind

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The wrapper strips CAP_SYS_RESOURCE and oomScoreAdj from the bundle's
// config.json and exec's process file, keeps the files' mode, and passes
// runc every argument unchanged.
func TestRuncWrapperStrips(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("the runc wrapper needs jq (apt-get install jq)")
	}
	dir := t.TempDir()
	args := filepath.Join(dir, "args")
	fake := filepath.Join(dir, "fake runc")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" >'"+args+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "wrapper")
	if err := os.WriteFile(wrapper, []byte(runcWrapperScript(fake)), 0o755); err != nil {
		t.Fatal(err)
	}
	caps := []string{"CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"}
	config := map[string]any{"ociVersion": "1.0.2", "process": map[string]any{
		"args": []string{"sh"}, "oomScoreAdj": -998,
		"capabilities": map[string]any{"bounding": caps, "effective": caps, "permitted": caps, "inheritable": caps, "ambient": caps},
	}}
	bundle := filepath.Join(dir, "bundle")
	os.Mkdir(bundle, 0o755)
	writeJSON(t, filepath.Join(bundle, "config.json"), config, 0o600)
	process := filepath.Join(dir, "process.json")
	writeJSON(t, process, config["process"], 0o644)

	for _, call := range [][]string{
		{"--root", "/r", "--log", "/l", "create", "--bundle", bundle, "--pid-file", "/p", "id"},
		{"--root", "/r", "exec", "--process", process, "--detach", "id"},
	} {
		if out, err := exec.Command(wrapper, call...).CombinedOutput(); err != nil {
			t.Fatalf("wrapper %v: %v: %s", call, err, out)
		}
		got, _ := os.ReadFile(args)
		if want := strings.Join(call, "\n") + "\n"; string(got) != want {
			t.Errorf("runc got args\n%s\nwant\n%s", got, want)
		}
	}
	want := []any{"CAP_CHOWN", "CAP_SYS_ADMIN"}
	var cfg struct {
		Process map[string]any `json:"process"`
	}
	readJSON(t, filepath.Join(bundle, "config.json"), &cfg)
	var proc map[string]any
	readJSON(t, process, &proc)
	for name, p := range map[string]map[string]any{"config.json": cfg.Process, "process file": proc} {
		if _, ok := p["oomScoreAdj"]; ok {
			t.Errorf("%s keeps oomScoreAdj", name)
		}
		if p["args"] == nil {
			t.Errorf("%s lost process.args: %v", name, p)
		}
		for set, list := range p["capabilities"].(map[string]any) {
			if !reflect.DeepEqual(list, want) {
				t.Errorf("%s: capabilities.%s = %v, want %v", name, set, list, want)
			}
		}
	}
	if st, _ := os.Stat(filepath.Join(bundle, "config.json")); st.Mode().Perm() != 0o600 {
		t.Errorf("config.json's mode changed to %v", st.Mode())
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "*", "*.tether-kind")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

func writeJSON(t *testing.T, path string, v any, mode os.FileMode) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v: %s", path, err, data)
	}
}

// Diff names what appeared and what went, and nothing else.
func TestDiff(t *testing.T) {
	before := Snapshot{"mount": {"/a ext4 x", "/b tmpfs y"}, "sysctl": {"kernel.panic=0"}}
	after := Snapshot{"mount": {"/a ext4 x", "/c overlay z"}, "sysctl": {"kernel.panic=10"}, "process": {"dockerd 7: dockerd"}}
	got := Diff(before, after)
	want := []string{"mount + /c overlay z", "mount - /b tmpfs y", "process + dockerd 7: dockerd", "sysctl + kernel.panic=10", "sysctl - kernel.panic=0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Diff = %q, want %q", got, want)
	}
	if d := Diff(before, before); len(d) != 0 {
		t.Errorf("Diff of a snapshot with itself = %q", d)
	}
}
