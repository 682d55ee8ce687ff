package doccheck

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestContainers(t *testing.T) {
	y := `apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
        - name: binder
          image: tether-binder
          args:
            - --leader-elect=true
            - --v=2 # verbose
        - name: no-args
          image: busybox
---
sidecars:
  provisioner:
    image: ghcr.io/tether-csi/provisioner:v0.1.0
    args: ["--timeout=30s"]
`
	got, err := Containers([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	want := []Container{
		{Line: 8, Image: "tether-binder", Args: []string{"--leader-elect=true", "--v=2"}},
		{Line: 17, Image: "ghcr.io/tether-csi/provisioner:v0.1.0", Args: []string{"--timeout=30s"}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Line != want[i].Line || got[i].Image != want[i].Image || !slices.Equal(got[i].Args, want[i].Args) {
			t.Errorf("%d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := Containers([]byte("a: [")); err == nil {
		t.Error("bad YAML: no error")
	}
}

func TestImageProgram(t *testing.T) {
	for image, want := range map[string]string{
		"tether-binder":                                      "binder",
		"tether-provisioner":                                 "provisioner",
		"ghcr.io/tether-csi/binder":                          "binder",
		"ghcr.io/tether-csi/provisioner:v0.1.0":              "provisioner",
		"ghcr.io/tether-csi/local-driver@sha256:0":           "local-driver",
		"localhost:5000/tether-provisioner:v0.1.0":           "",
		"registry.k8s.io/sig-storage/csi-provisioner:v6.3.0": "",
		"busybox": "",
	} {
		if got := ImageProgram(image); got != want {
			t.Errorf("%s: got %q, want %q", image, got, want)
		}
	}
}

func TestUnknownArgs(t *testing.T) {
	known := map[string]bool{"root": true, "v": true}
	got := UnknownArgs([]string{"--root=/x", "-v=2", "--rot=/y", "plain", "--", "-capacity"}, known)
	if want := []string{"--rot", "--capacity"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestManifestContainersSkipsChartTemplates(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("deploy/chart/Chart.yaml", "apiVersion: v2\nname: tether\n")
	write("deploy/chart/templates/binder.yaml", "image: {{ .Values.image }}\nargs: [{{ .Values.args }}]\n")
	write("deploy/x/binder.yaml", "image: tether-binder\nargs: [--v=2]\n")
	write("examples/templates/y.yaml", "image: tether-binder\nargs: [--v=3]\n") // no Chart.yaml: read
	got, err := ManifestContainers(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(got["deploy/x/binder.yaml"]) != 1 || len(got["examples/templates/y.yaml"]) != 1 || got["deploy/chart/templates/binder.yaml"] != nil {
		t.Errorf("got %+v", got)
	}
}
