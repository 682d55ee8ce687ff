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
	// built with (ghcr.io/tether-csi): <Registry>/<component>:<tag>. Push
	// then writes Dir's tether.yaml naming them, as ManifestsFile(Registry)
	// in Dir (see Retarget), and tether-production.yaml as
	// RetargetedFile("tether-production.yaml", Registry), unless they name
	// them already.
	Registry string
	// Remote are extra options (transport, auth); by default the
	// keychain of ~/.docker/config.json.
	Remote []remote.Option
	// Force moves a tag the registry already has to the bundle's index.
	// Without it Push refuses, before it sends anything, to move any tag
	// to other bytes than it names (a tether.yaml already published pins
	// those); a tag that names the bundle's index already is left as it
	// is.
	Force bool
	Log   func(format string, args ...any)
}

// Push uploads every component's archive to a registry: the platform
// images, then, under the tag, the index exactly as the archive holds it,
// so the registry serves the digest tether.yaml pins whatever order the
// bundle's platforms were built in. It refuses an archive that disagrees
// with images.json. First it looks every tag up: if one names other bytes
// and o.Force is not set, it sends nothing and says which; a tag that
// names the pinned index already is skipped, so pushing a bundle again is
// a no-op. (A registry has no compare-and-swap on tags: a push by someone
// else between the look-up and the write is not seen.)
func Push(ctx context.Context, o PushOptions) error {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	built, err := ReadBuilt(o.Dir)
	if err != nil {
		return err
	}
	opts := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, o.Remote...)
	tags := make([]name.Tag, len(built))
	actions := make([]tagAction, len(built))
	var refused []string
	for i, b := range built {
		if tags[i], err = name.NewTag(Target(b, o.Registry)); err != nil {
			return err
		}
		current, err := currentDigest(tags[i], opts)
		if err != nil {
			return err
		}
		switch actions[i] = decideTag(current, b.Digest, o.Force); actions[i] {
		case refuseTag:
			refused = append(refused, fmt.Sprintf("%s is %s, the bundle pins %s", tags[i], current, b.Digest))
		case pushTag:
			if current != "" {
				o.Log("%s: -force moves the tag from %s", tags[i], current)
			}
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("pushed nothing: %s; a tether.yaml already published pins the digest the tag has now, and would no longer match it (push -force to move the tags anyway)",
			strings.Join(refused, "; "))
	}
	for i, b := range built {
		if actions[i] == skipTag {
			o.Log("%s@%s: already there", tags[i], b.Digest)
			continue
		}
		if err := pushComponent(o, b, tags[i], opts); err != nil {
			return err
		}
	}
	if o.Registry == "" {
		return nil
	}
	files, err := writeRetargeted(o.Dir, built, o.Registry)
	for _, file := range files {
		o.Log("wrote %s: the bundle's manifests with the images in %s, the same digests; apply it with kubectl apply -f %s", file, o.Registry, file)
	}
	if err != nil {
		return fmt.Errorf("the manifests for %s: %w", o.Registry, err)
	}
	return nil
}

// Target is the reference Push gives a component: its built reference, or
// <registry>/<component>:<tag> if registry is set.
func Target(b Built, registry string) string {
	if registry == "" {
		return b.Ref
	}
	return strings.TrimSuffix(registry, "/") + "/" + b.Component + b.Ref[strings.LastIndex(b.Ref, ":"):]
}

// pushComponent pushes one component's archive under tag.
func pushComponent(o PushOptions, b Built, tag name.Tag, opts []remote.Option) error {
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
		return fmt.Errorf("push %s: %w", tag, err)
	}
	desc, err := remote.Head(tag, opts...)
	if err != nil {
		return fmt.Errorf("read back %s: %w", tag, err)
	}
	if desc.Digest.String() != b.Digest {
		return fmt.Errorf("%s: the registry serves %s, tether.yaml pins %s", tag, desc.Digest, b.Digest)
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
