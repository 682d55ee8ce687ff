package release

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestManifestsFile(t *testing.T) {
	for registry, want := range map[string]string{
		"registry.example.com/tether":  "tether-registry.example.com_tether.yaml",
		"registry.example.com/tether/": "tether-registry.example.com_tether.yaml",
		"localhost:5000":               "tether-localhost_5000.yaml",
		"ghcr.io/Me/x":                 "tether-ghcr.io_Me_x.yaml",
	} {
		if got := ManifestsFile(registry); got != want {
			t.Errorf("ManifestsFile(%q) = %q, want %q", registry, got, want)
		}
	}
	if got, want := RetargetedFile("tether-production.yaml", "localhost:5000/t"), "tether-production-localhost_5000_t.yaml"; got != want {
		t.Errorf("RetargetedFile = %q, want %q", got, want)
	}
}

func TestRetarget(t *testing.T) {
	d := "@sha256:" + strings.Repeat("a", 64)
	e := "@sha256:" + strings.Repeat("b", 64)
	built := []Built{
		{Component: "binder", Ref: "ghcr.io/tether-csi/binder:v0.1.0", Digest: d[1:]},
		{Component: "provisioner", Ref: "ghcr.io/tether-csi/provisioner:v0.1.0", Digest: e[1:]},
	}
	const registrar = "        image: registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.13.0\n"
	for _, tc := range []struct {
		name, registry, in, want string
		ok                       bool
	}{
		{"both, another registry", "registry.example.com:5000/tether/",
			"        image: ghcr.io/tether-csi/binder:v0.1.0" + d + "\n" + registrar + "      - image: ghcr.io/tether-csi/provisioner:v0.1.0" + e + "\n",
			"        image: registry.example.com:5000/tether/binder:v0.1.0" + d + "\n" + registrar + "      - image: registry.example.com:5000/tether/provisioner:v0.1.0" + e + "\n", true},
		{"the same registry: the same bytes", "ghcr.io/tether-csi",
			"        image: ghcr.io/tether-csi/binder:v0.1.0" + d + "\n        image: ghcr.io/tether-csi/provisioner:v0.1.0" + e + "\n",
			"        image: ghcr.io/tether-csi/binder:v0.1.0" + d + "\n        image: ghcr.io/tether-csi/provisioner:v0.1.0" + e + "\n", true},
		{"a pin elsewhere than an image line stays", "r.example/t",
			"# ghcr.io/tether-csi/binder:v0.1.0" + d + "\n        image: ghcr.io/tether-csi/binder:v0.1.0" + d + "\n        image: ghcr.io/tether-csi/provisioner:v0.1.0" + e + "\n",
			"# ghcr.io/tether-csi/binder:v0.1.0" + d + "\n        image: r.example/t/binder:v0.1.0" + d + "\n        image: r.example/t/provisioner:v0.1.0" + e + "\n", true},
		{"a component's pin missing", "r.example/t", "        image: ghcr.io/tether-csi/binder:v0.1.0" + d + "\n", "", false},
		{"another digest is not the pin", "r.example/t",
			"        image: ghcr.io/tether-csi/binder:v0.1.0" + e + "\n        image: ghcr.io/tether-csi/provisioner:v0.1.0" + e + "\n", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Retarget([]byte(tc.in), built, tc.registry)
			if (err == nil) != tc.ok {
				t.Fatalf("Retarget: %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && string(got) != tc.want {
				t.Errorf("Retarget:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestPushWritesTetherYAMLForTheRegistry pushes a bundle whose tether.yaml
// is the repository's deploy/csi rendered as make release does, to another
// registry: push writes tether-<registry>.yaml, whose every one of tether's
// images is in that registry, pinned by the same digest, and resolves
// there; tether.yaml itself is unchanged (SHA256SUMS still holds). The
// bundle's tether-production.yaml (deploy/production) gets
// tether-production-<registry>.yaml, naming the binder in that registry.
func TestPushWritesTetherYAMLForTheRegistry(t *testing.T) {
	dir := t.TempDir()
	var built []Built
	for _, c := range Components {
		built = append(built, testBundle(t, dir, "ghcr.io/tether-csi/"+c.Name+":v0.1.0", "", amd64, arm64))
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := Render(root, "deploy/csi", built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tether.yaml"), manifests, 0o644); err != nil {
		t.Fatal(err)
	}
	production, err := Render(root, "deploy/production", built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tether-production.yaml"), production, 0o644); err != nil {
		t.Fatal(err)
	}
	host := testRegistry(t, nil)
	registry := host + "/tether"
	if err := Push(t.Context(), PushOptions{Dir: dir, Registry: registry}); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "tether.yaml")); string(again) != string(manifests) {
		t.Error("push changed tether.yaml")
	}
	out, err := os.ReadFile(filepath.Join(dir, ManifestsFile(registry)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "ghcr.io/tether-csi/") {
		t.Error("the pushed tether.yaml still names ghcr.io/tether-csi/")
	}
	for _, b := range built {
		pin := registry + "/" + b.Component + ":v0.1.0@" + b.Digest
		if !regexp.MustCompile(`(?m)^\s*(- )?image: ` + regexp.QuoteMeta(pin) + `$`).Match(out) {
			t.Errorf("the pushed tether.yaml has no image %s", pin)
		}
		if got := served(t, pin); got != b.Digest {
			t.Errorf("%s: the registry serves %q", pin, got)
		}
	}
	if len(out) == 0 || strings.Count(string(out), "\n") != strings.Count(string(manifests), "\n") {
		t.Errorf("the pushed tether.yaml has %d lines, tether.yaml %d", strings.Count(string(out), "\n"), strings.Count(string(manifests), "\n"))
	}

	// tether-production.yaml too: the binder's image, in the registry.
	prod, err := os.ReadFile(filepath.Join(dir, RetargetedFile("tether-production.yaml", registry)))
	if err != nil {
		t.Fatal(err)
	}
	binder := registry + "/binder:v0.1.0@" + built[0].Digest
	if built[0].Component != "binder" || !strings.Contains(string(prod), "image: "+binder+"\n") || strings.Contains(string(prod), "ghcr.io/tether-csi/") {
		t.Errorf("the pushed tether-production.yaml does not name %s alone:\n%s", binder, prod)
	}
}
