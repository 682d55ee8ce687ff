package release

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// tagAction is what Push does with one component's tag.
type tagAction int

const (
	// pushTag: the tag is absent, or -force moves it.
	pushTag tagAction = iota
	// skipTag: the tag already names the pinned index; nothing to send.
	skipTag
	// refuseTag: the tag names other bytes; moving it would leave a
	// published tether.yaml pinning a digest the tag no longer serves.
	refuseTag
)

// decideTag says what to do with a tag the registry serves at current
// ("" if it has no such tag) when the bundle pins want.
func decideTag(current, want string, force bool) tagAction {
	switch {
	case current == "":
		return pushTag
	case current == want:
		return skipTag
	case force:
		return pushTag
	default:
		return refuseTag
	}
}

// absent says whether err, from a HEAD of a tag, means the registry has no
// such tag (or no such repository) rather than that it could not answer.
func absent(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	if te.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range te.Errors {
		if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
			return true
		}
	}
	return false
}

// currentDigest is the digest the registry serves for tag, "" if none.
func currentDigest(tag name.Tag, opts []remote.Option) (string, error) {
	desc, err := remote.Head(tag, opts...)
	if absent(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look up %s: %w", tag, err)
	}
	return desc.Digest.String(), nil
}
