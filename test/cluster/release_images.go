package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/internal/release"
)

// ReleaseRegistry names tether's images on real nodes: the images of `make
// images`, built by the same code for this machine's platform and tagged
// e2e (a tag other than latest: the kubelet never pulls them).
const ReleaseRegistry = "localhost/tether"

var (
	releaseMu     sync.Mutex
	releaseImages []Image
)

// ReleaseImages builds tether's images as `make images` does (static
// binaries stamped with `git describe`, non-root, no shell, OCI archives)
// for this machine's platform, once per test binary while their archives
// last: the first test to ask keeps them until it ends, a later test
// builds them again from Go's build cache.
func ReleaseImages(t T) []Image {
	t.Helper()
	releaseMu.Lock()
	defer releaseMu.Unlock()
	if len(releaseImages) > 0 {
		if _, err := os.Stat(releaseImages[0].Archive); err == nil {
			return releaseImages
		}
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tether-images-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	version := "devel"
	if out, err := exec.Command("git", "-C", root, "describe", "--tags", "--always", "--dirty").Output(); err == nil {
		version = strings.TrimSpace(string(out))
	}
	platform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	built, err := release.BuildImages(t.Context(), release.BuildOptions{Root: root, Version: version, Tag: "e2e",
		Registry: ReleaseRegistry, Platforms: []v1.Platform{platform}, Out: dir})
	if err != nil {
		t.Fatalf("make images' build: %v", err)
	}
	var images []Image
	for _, b := range built {
		p := b.Platforms[platform.OS+"/"+platform.Architecture]
		// containerd's CRI reports an image by its first <repo>@<digest>
		// name, and the archive names the index so (internal/release's
		// WriteArchive); the config digest is the ID without one.
		images = append(images, Image{Ref: b.Ref, Archive: filepath.Join(dir, b.File), IDs: []string{b.Digest, p.Digest, p.Config},
			Pin: b.Ref + "@" + b.Digest})
	}
	releaseImages = images
	return images
}

// CheckRunsReleaseImages fails the test unless every container of
// DeployNamespace's pods that names one of tether's images runs exactly the
// image ReleaseImages built (its imageID is that image's index, manifest
// or config digest).
func (c *Cluster) CheckRunsReleaseImages(t T) {
	t.Helper()
	ids := map[string][]string{}
	for _, img := range ReleaseImages(t) {
		ids[img.Ref] = img.IDs
	}
	pods, err := c.Client.CoreV1().Pods(DeployNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, pod := range pods.Items {
		for _, st := range pod.Status.ContainerStatuses {
			want, ours := ids[st.Image]
			if !ours {
				continue
			}
			checked++
			if !slices.ContainsFunc(want, func(id string) bool { return strings.HasSuffix(st.ImageID, id) }) {
				t.Errorf("pod %s container %s runs %s (%s), not the image make images built (%v)", pod.Name, st.Name, st.Image, st.ImageID, want)
			}
		}
	}
	if checked == 0 {
		t.Errorf("no container in %s runs one of tether's images", DeployNamespace)
	}
}
