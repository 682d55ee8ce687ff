package kind

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// LoadImage loads img into the engine under ref (docker load of a
// docker-archive written on the fly).
func LoadImage(ctx context.Context, d *Docker, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarball.Write(tag, img, pw)) }()
	cmd := d.Command(ctx, d.client, "load")
	cmd.Stdin = pr
	out, err := cmd.CombinedOutput()
	pr.CloseWithError(io.EOF)
	if err != nil {
		return fmt.Errorf("docker load %s: %v: %s", ref, err, out)
	}
	return nil
}

// BusyboxImage is Debian's static busybox (busybox-static's /bin/busybox)
// as an image: /bin/busybox, a link per applet, /etc/passwd and /etc/group,
// /tmp; it runs /bin/sh.
func BusyboxImage() (v1.Image, error) {
	const busybox = "/bin/busybox"
	binary, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("%v (apt-get install busybox-static)", err)
	}
	list, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %v (is it busybox-static?)", busybox, err)
	}
	applets := strings.Fields(string(list))
	sort.Strings(applets)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, dir := range []string{"bin/", "etc/", "root/", "tmp/"} {
		mode := int64(0o755)
		if dir == "tmp/" {
			mode = 0o1777
		}
		tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: mode, ModTime: epoch})
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{
		{"bin/busybox", 0o755, binary},
		{"etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\n")},
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	for _, a := range applets {
		if a != "busybox" {
			tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: epoch})
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", goarch()
	cfg.Config = v1.Config{Entrypoint: []string{"/bin/sh"}, Env: []string{"PATH=/bin"}, WorkingDir: "/"}
	return mutate.ConfigFile(img, cfg)
}
