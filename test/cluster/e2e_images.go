package cluster

import (
	"bytes"
	"os/exec"
	"path"
	"strings"
)

// E2EImages are the images Kubernetes' e2e storage tests run, made on this
// machine under the exact references the pinned e2e.test names (its
// --list-images), so that kubelet finds them and never pulls: agnhost (our
// build of it, make tools, with busybox beside it for the tests' shell
// commands), and busybox for busybox, nginx and glibc-dns-testing (the
// storage tests give those a command: a shell, sleep, ls, cat) and pause.
// node are NodeImages' images, whose busybox and pause are reused.
func E2EImages(t T, node []Image) []Image {
	t.Helper()
	e2e, err := Tool("e2e.test")
	if err != nil {
		t.Fatal(err)
	}
	agnhost, err := Tool("agnhost")
	if err != nil {
		t.Fatal(err)
	}
	var busybox, pause Image
	have := map[string]bool{}
	for _, img := range node {
		have[img.Ref] = true
		switch img.Ref {
		case BusyboxImage:
			busybox = img
		case PauseImage:
			pause = img
		}
	}
	if busybox.Ref == "" || pause.Ref == "" {
		t.Fatal("E2EImages: the node images have no busybox or pause")
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), e2e, "--list-images")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("e2e.test --list-images: %v\n%s", err, stderr.String())
	}
	var images []Image
	for _, ref := range strings.Fields(string(out)) {
		img, ok := e2eImage(ref, busybox, pause, agnhost)
		if ok && !have[ref] {
			have[ref] = true
			images = append(images, img)
		}
	}
	if len(images) < 5 {
		t.Fatalf("e2e.test --list-images named %d of the 5 images the storage tests need:\n%s", len(images), out)
	}
	return images
}

// e2eImage makes the image for an e2e image reference, when it is one the
// storage tests run.
func e2eImage(ref string, busybox, pause Image, agnhost string) (Image, bool) {
	name, _, _ := strings.Cut(path.Base(ref), ":")
	var img Image
	switch name {
	case "busybox", "nginx", "glibc-dns-testing":
		img = busybox
	case "agnhost":
		if strings.Contains(ref, "k8s-authenticated-test") { // the private-registry image of the pull tests
			return Image{}, false
		}
		img = busybox
		img.Files = map[string]string{"agnhost": agnhost}
		for k, v := range busybox.Files {
			img.Files[k] = v
		}
		img.Entrypoint = []string{"/agnhost"}
	case "pause":
		img = pause
	default:
		return Image{}, false
	}
	img.Ref = ref
	return img, true
}
