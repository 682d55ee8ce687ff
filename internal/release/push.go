package release

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ReadBuilt reads the images.json BuildImages wrote into dir.
func ReadBuilt(dir string) ([]Built, error) {
	data, err := os.ReadFile(filepath.Join(dir, "images.json"))
	if err != nil {
		return nil, err
	}
	var built []Built
	if err := json.Unmarshal(data, &built); err != nil {
		return nil, fmt.Errorf("images.json: %w", err)
	}
	return built, nil
}

// PushOptions are what Push needs.
type PushOptions struct {
	// Dir holds the archives and images.json (a release folder).
	Dir string
	// Registry, if set, replaces the registry and path the images were
	// built with (ghcr.io/tether-csi): <Registry>/<component>:<tag>.
	Registry string
	// Remote are extra options (transport, auth); by default the
	// keychain of ~/.docker/config.json.
	Remote []remote.Option
	Log    func(format string, args ...any)
}

// Push uploads every component's archive to a registry: the platform
// images, then, under the tag, the index exactly as the archive holds it,
// so the registry serves the digest tether.yaml pins whatever order the
// bundle's platforms were built in. It refuses an archive that disagrees
// with images.json.
func Push(ctx context.Context, o PushOptions) error {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	built, err := ReadBuilt(o.Dir)
	if err != nil {
		return err
	}
	opts := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, o.Remote...)
	for _, b := range built {
		if err := pushComponent(o, b, opts); err != nil {
			return err
		}
	}
	return nil
}

// pushComponent pushes one component's archive.
func pushComponent(o PushOptions, b Built, opts []remote.Option) error {
	ref := b.Ref
	if o.Registry != "" {
		ref = strings.TrimSuffix(o.Registry, "/") + "/" + b.Component + ref[strings.LastIndex(ref, ":"):]
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "tether-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	a, err := ReadArchive(filepath.Join(o.Dir, b.File), tmp)
	if err != nil {
		return err
	}
	if err := checkArchive(a.Index, b); err != nil {
		return fmt.Errorf("%s: %w", b.File, err)
	}
	if err := remote.WriteIndex(tag, a.Index, opts...); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	desc, err := remote.Head(tag, opts...)
	if err != nil {
		return fmt.Errorf("read back %s: %w", ref, err)
	}
	if desc.Digest.String() != b.Digest {
		return fmt.Errorf("%s: the registry serves %s, tether.yaml pins %s", ref, desc.Digest, b.Digest)
	}
	o.Log("pushed %s@%s", tag, desc.Digest)
	return nil
}

// checkArchive fails unless idx is the index images.json describes: its
// digest, and one image per platform with the digests listed.
func checkArchive(idx v1.ImageIndex, b Built) error {
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	if d.String() != b.Digest {
		return fmt.Errorf("holds index %s, images.json and tether.yaml pin %s", d, b.Digest)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	got := map[string]string{}
	for _, desc := range m.Manifests {
		if desc.Platform == nil {
			return fmt.Errorf("image %s has no platform", desc.Digest)
		}
		got[desc.Platform.OS+"/"+desc.Platform.Architecture] = desc.Digest.String()
	}
	want := map[string]string{}
	for plat, img := range b.Platforms {
		want[plat] = img.Digest
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("holds images %v, images.json lists %v", got, want)
	}
	return nil
}
