package release

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// testRegistry is go-containerregistry's registry on loopback; it returns
// its host:port.
func testRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// served is the digest the registry serves for ref, "" if none.
func served(t *testing.T, ref string) string {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(r)
	if err != nil {
		return ""
	}
	return desc.Digest.String()
}

// TestPushKeepsTheDigests pushes release folders built for both platform
// orders (-platforms linux/arm64,linux/amd64 too) and reads the tag back:
// the registry serves the digest images.json (and so tether.yaml) pins, and
// every platform image is there.
func TestPushKeepsTheDigests(t *testing.T) {
	for _, order := range [][]v1.Platform{{amd64, arm64}, {arm64, amd64}} {
		t.Run(order[0].Architecture+"-first", func(t *testing.T) {
			dir := t.TempDir()
			b := testBundle(t, dir, "ghcr.io/tether-csi/binder:v0.1.0", "", order...)
			host := testRegistry(t)
			if err := Push(t.Context(), PushOptions{Dir: dir, Registry: host + "/tether"}); err != nil {
				t.Fatal(err)
			}
			if got := served(t, host+"/tether/binder:v0.1.0"); got != b.Digest {
				t.Errorf("registry serves %q, pinned %s", got, b.Digest)
			}
			ref, _ := name.ParseReference(host + "/tether/binder:v0.1.0")
			idx, err := remote.Index(ref)
			if err != nil {
				t.Fatal(err)
			}
			for plat, img := range b.Platforms {
				h, _ := v1.NewHash(img.Digest)
				got, err := idx.Image(h)
				if err != nil {
					t.Fatalf("%s: %v", plat, err)
				}
				if _, err := got.ConfigFile(); err != nil {
					t.Errorf("%s: config: %v", plat, err)
				}
			}
		})
	}
}
