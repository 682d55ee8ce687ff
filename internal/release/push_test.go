package release

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// testRegistry is go-containerregistry's registry on loopback; it returns
// its host:port. writes, if not nil, counts the requests that would change
// something (all but GET and HEAD).
func testRegistry(t *testing.T, writes *atomic.Int64) string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if writes != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
			writes.Add(1)
		}
		reg.ServeHTTP(w, r)
	}))
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
			host := testRegistry(t, nil)
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

// TestPushNeverMovesATagSilently: pushing the same bundle again sends
// nothing and succeeds; a bundle with other bytes under the same tags is
// refused before anything is sent (not even a component whose tag is
// new), and the tags keep serving what a published tether.yaml pins;
// -force moves them.
func TestPushNeverMovesATagSilently(t *testing.T) {
	var writes atomic.Int64
	host := testRegistry(t, &writes)
	first := t.TempDir()
	binder := testBundle(t, first, "ghcr.io/tether-csi/binder:v0.1.0", "", amd64, arm64)
	o := PushOptions{Dir: first, Registry: host + "/tether"}
	if err := Push(t.Context(), o); err != nil {
		t.Fatal(err)
	}

	writes.Store(0)
	if err := Push(t.Context(), o); err != nil {
		t.Fatalf("the same bundle again: %v", err)
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("the same bundle again sent %d writes, want none", n)
	}

	other := t.TempDir()
	moved := testBundle(t, other, "ghcr.io/tether-csi/binder:v0.1.0", "-rebuilt", amd64, arm64)
	driver := testBundle(t, other, "ghcr.io/tether-csi/local-driver:v0.1.0", "", amd64, arm64)
	writes.Store(0)
	err := Push(t.Context(), PushOptions{Dir: other, Registry: host + "/tether"})
	if err == nil || !strings.Contains(err.Error(), "-force") || !strings.Contains(err.Error(), binder.Digest) {
		t.Fatalf("other bytes under the same tag: %v, want a refusal naming %s and -force", err, binder.Digest)
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("a refused push sent %d writes, want none", n)
	}
	if got := served(t, host+"/tether/binder:v0.1.0"); got != binder.Digest {
		t.Errorf("after the refusal the tag serves %s, want %s", got, binder.Digest)
	}
	if got := served(t, host+"/tether/local-driver:v0.1.0"); got != "" {
		t.Errorf("after the refusal local-driver serves %s, want nothing", got)
	}

	if err := Push(t.Context(), PushOptions{Dir: other, Registry: host + "/tether", Force: true}); err != nil {
		t.Fatalf("-force: %v", err)
	}
	for ref, want := range map[string]string{"binder:v0.1.0": moved.Digest, "local-driver:v0.1.0": driver.Digest} {
		if got := served(t, host+"/tether/"+ref); got != want {
			t.Errorf("after -force %s serves %s, want %s", ref, got, want)
		}
	}
}
