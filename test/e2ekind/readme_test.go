package e2ekind

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tether-csi/tether/internal/release"
	"github.com/tether-csi/tether/test/kind"
)

// The README's two install blocks are where make e2e-kind finds them, and
// say what it runs: the push block pushes to the README's registry and
// applies the file tether-push writes for it; the load block loads every
// archive with kind and applies tether.yaml; docs/deploy.md's step from
// the one to the other makes every kind node forget the pulls from the
// README's registry. (make e2e-kind then runs them
// on a kind cluster; this runs in make test.)
func TestReadmeInstallBlocks(t *testing.T) {
	root, err := kind.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	push := strings.Join(readmeBlock(t, root, readmePush), "\n")
	for _, want := range []string{"sha256sum -c SHA256SUMS", "./tether-push_vX.Y.Z_linux_amd64 -registry " + readmeRegistry,
		"kubectl apply -f " + release.ManifestsFile(readmeRegistry)} {
		if !strings.Contains(push, want) {
			t.Errorf("the README's push block has no %q:\n%s", want, push)
		}
	}
	load := strings.Join(readmeBlock(t, root, readmeLoad), "\n")
	for _, want := range []string{"kind load image-archive", "kubectl apply -f tether.yaml"} {
		if !strings.Contains(load, want) {
			t.Errorf("the README's load block has no %q:\n%s", want, load)
		}
	}
	move := strings.Join(docBlock(t, root, "docs/deploy.md", deployMove), "\n")
	for _, want := range []string{"kind get nodes", "systemctl stop kubelet", `grep -l "\"` + readmeRegistry + `/" /var/lib/kubelet/image_manager/pulled/*`, "systemctl start kubelet"} {
		if !strings.Contains(move, want) {
			t.Errorf("docs/deploy.md's block from the push recipe to the load recipe has no %q:\n%s", want, move)
		}
	}
	got := userLine("./tether-push_vX.Y.Z_linux_amd64 -registry registry.example.com/tether; kubectl apply -f tether-registry.example.com_tether.yaml", "v9.9.9")
	if !strings.Contains(got, "-registry "+pushRegistry+";") || !strings.Contains(got, release.ManifestsFile(pushRegistry)) || !strings.Contains(got, "v9.9.9") {
		t.Errorf("userLine: %s", got)
	}
}

// The cluster keeps kubeadm's own controllers (joins need the bootstrap
// signer) and turns KCM's PV binder off, with the nodes of the README's kind
// config.
func TestKindConfig(t *testing.T) {
	root, err := kind.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var readme, ours map[string]any
	if err := yaml.Unmarshal([]byte(strings.Join(readmeBlock(t, root, readmeKind), "\n")), &readme); err != nil {
		t.Fatalf("the README's kind config: %v", err)
	}
	for _, own := range []bool{true, false} {
		if err := yaml.Unmarshal([]byte(kindConfig(own)), &ours); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(readme["nodes"], ours["nodes"]) || readme["kind"] != ours["kind"] || readme["apiVersion"] != ours["apiVersion"] {
			t.Errorf("kindConfig(%v)'s nodes are not the README's:\n%v\n%v", own, ours["nodes"], readme["nodes"])
		}
	}
	for _, own := range []bool{true, false} {
		c := kindConfig(own)
		if !strings.Contains(c, `value: "*,bootstrapsigner,tokencleaner,-persistentvolume-binder-controller"`) {
			t.Errorf("kindConfig(%v) does not keep bootstrapsigner and tokencleaner while turning the binder off:\n%s", own, c)
		}
		if strings.Contains(c, "addon/coredns") != own {
			t.Errorf("kindConfig(%v): CoreDNS is skipped only on tether's node image, which has none:\n%s", own, c)
		}
		if strings.Contains(c, "config_path") == own {
			t.Errorf("kindConfig(%v): the registry's config_path patch is for public images only (tether's sets it):\n%s", own, c)
		}
	}
}
