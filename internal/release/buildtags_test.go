package release

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tether-csi/tether/internal/version"
)

// TestMakefileBuildTags: make build builds with the tags the release and
// the tests build with.
func TestMakefileBuildTags(t *testing.T) {
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^BUILD_TAGS := (.*)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("the Makefile sets no BUILD_TAGS :=")
	}
	if got := strings.TrimSpace(string(m[1])); got != version.BuildTags {
		t.Errorf("the Makefile's BUILD_TAGS %q, internal/version.BuildTags %q: want the same", got, version.BuildTags)
	}
	if !strings.Contains(string(makefile), `-tags "$(BUILD_TAGS)"`) {
		t.Error("make build does not pass -tags \"$(BUILD_TAGS)\"")
	}
}

// TestProgramsLinkNoTemplates: with the build tags, no package a shipped
// program links may execute an html template. html/template calls
// methods by name through reflection, and a binary that may do so keeps
// every exported method of every type it holds (the provisioner went from
// 36 MB to 57 MB through gRPC's x/net/trace). A new import that brings it
// back fails here; text/template alone stays (cobra, through
// component-base's logging flags, links it but runs no template).
func TestProgramsLinkNoTemplates(t *testing.T) {
	for _, pkg := range []string{"./cmd/provisioner", "./cmd/binder", "./cmd/kubectl-tether", "./cmd/tether-push", "./examples/local-driver"} {
		cmd := exec.Command("go", "list", "-tags", version.BuildTags, "-deps", pkg)
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		for _, banned := range []string{"html/template", "golang.org/x/net/trace"} {
			if slices.Contains(deps, banned) {
				t.Errorf("%s links %s (built with -tags %s)", pkg, banned, version.BuildTags)
			}
		}
	}
}
