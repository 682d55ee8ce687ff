package release

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
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

// Push uploads every component's platform images and their index, and
// checks that the registry's index has the digest tether.yaml pins: the
// release runs from the registry exactly as it was built.
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
		ref := b.Ref
		if o.Registry != "" {
			ref = strings.TrimSuffix(o.Registry, "/") + "/" + b.Component + ref[strings.LastIndex(ref, ":"):]
		}
		tag, err := name.NewTag(ref)
		if err != nil {
			return err
		}
		var images []v1.Image
		for plat, a := range b.Archives {
			tmp, err := os.MkdirTemp("", "tether-push-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			img, _, err := ReadArchive(filepath.Join(o.Dir, a.File), tmp)
			if err != nil {
				return err
			}
			d, err := img.Digest()
			if err != nil {
				return err
			}
			if d.String() != a.Digest {
				return fmt.Errorf("%s: digest %s, images.json says %s", a.File, d, a.Digest)
			}
			if err := remote.Write(tag.Context().Digest(d.String()), img, opts...); err != nil {
				return fmt.Errorf("push %s %s: %w", ref, plat, err)
			}
			images = append(images, img)
		}
		idx, err := NewIndex(sortByPlatform(images))
		if err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		if d.String() != b.Digest {
			return fmt.Errorf("%s: index digest %s, tether.yaml pins %s", ref, d, b.Digest)
		}
		if err := remote.WriteIndex(tag, idx, opts...); err != nil {
			return fmt.Errorf("push %s: %w", ref, err)
		}
		o.Log("pushed %s@%s", tag, d)
	}
	return nil
}

// sortByPlatform orders images as BuildImages built them (Platforms'
// order), so the index has the same bytes and digest.
func sortByPlatform(images []v1.Image) []v1.Image {
	rank := func(img v1.Image) int {
		cfg, err := img.ConfigFile()
		if err != nil {
			return len(Platforms)
		}
		for i, p := range Platforms {
			if p.OS == cfg.OS && p.Architecture == cfg.Architecture {
				return i
			}
		}
		return len(Platforms)
	}
	out := append([]v1.Image(nil), images...)
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}
