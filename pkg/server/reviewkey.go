package server

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"io"
	"maps"
	"slices"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
)

// accessSpec is the SubjectAccessReview that asks whether u may use verb
// on path, a non-resource URL: u's name, UID, groups and extra as the
// TokenReview gave them.
func accessSpec(u authnv1.UserInfo, verb, path string) authzv1.SubjectAccessReviewSpec {
	var extra map[string]authzv1.ExtraValue
	if u.Extra != nil {
		extra = make(map[string]authzv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = authzv1.ExtraValue(v)
		}
	}
	return authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
	}
}

// accessKey is the access cache's key for spec: the SHA-256 of every
// field of the review (user, UID, groups in their order, extra by sorted
// key with each key's values in their order, the verb and the path), each
// string preceded by its length and each list by its count, so that two
// specs share a key only when they ask the same (or SHA-256 collides),
// and the key is 32 bytes whatever the path's length. ok is false for a
// spec the key does not cover: one with ResourceAttributes, or without
// NonResourceAttributes (accessSpec makes neither).
func accessKey(spec authzv1.SubjectAccessReviewSpec) (key [sha256.Size]byte, ok bool) {
	na := spec.NonResourceAttributes
	if spec.ResourceAttributes != nil || na == nil {
		return key, false
	}
	w := keyWriter{h: sha256.New()}
	w.str(spec.User)
	w.str(spec.UID)
	w.strs(spec.Groups)
	w.count(len(spec.Extra))
	for _, k := range slices.Sorted(maps.Keys(spec.Extra)) {
		w.str(k)
		w.strs(spec.Extra[k])
	}
	w.str(na.Verb)
	w.str(na.Path)
	w.h.Sum(key[:0])
	return key, true
}

// keyWriter writes an unambiguous encoding of strings and lists to h.
type keyWriter struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

func (w *keyWriter) count(n int) {
	w.h.Write(binary.AppendUvarint(w.buf[:0], uint64(n)))
}

func (w *keyWriter) str(s string) {
	w.count(len(s))
	_, _ = io.WriteString(w.h, s)
}

func (w *keyWriter) strs(ss []string) {
	w.count(len(ss))
	for _, s := range ss {
		w.str(s)
	}
}

// Estimates, for userBytes, of what a string's header and an extra key's
// map slot with its slice's header cost besides their bytes.
const (
	stringHeader = 16
	extraSlot    = 64
)

// userBytes is what a token cache entry's user holds besides
// entryOverhead: its strings' bytes, with a header for each group and
// extra value and a slot for each extra key.
func userBytes(a tokenAnswer) int {
	u := a.user
	n := len(u.Username) + len(u.UID)
	for _, g := range u.Groups {
		n += stringHeader + len(g)
	}
	for k, vs := range u.Extra {
		n += extraSlot + len(k)
		for _, v := range vs {
			n += stringHeader + len(v)
		}
	}
	return n
}

// reasonBytes is what an access cache entry holds besides entryOverhead:
// the API server's reason.
func reasonBytes(a accessAnswer) int { return len(a.reason) }
