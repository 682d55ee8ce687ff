package server

import (
	"crypto/sha256"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

func TestAccessSpec(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    authnv1.UserInfo
		want authzv1.SubjectAccessReviewSpec
	}{
		{name: "every field", u: authnv1.UserInfo{Username: "alice", UID: "1", Groups: []string{"b", "a"}, Extra: map[string]authnv1.ExtraValue{"scopes": {"x", "y"}}},
			want: authzv1.SubjectAccessReviewSpec{User: "alice", UID: "1", Groups: []string{"b", "a"}, Extra: map[string]authzv1.ExtraValue{"scopes": {"x", "y"}},
				NonResourceAttributes: &authzv1.NonResourceAttributes{Verb: "get", Path: "/metrics"}}},
		{name: "no extra", u: authnv1.UserInfo{Username: "alice"},
			want: authzv1.SubjectAccessReviewSpec{User: "alice", NonResourceAttributes: &authzv1.NonResourceAttributes{Verb: "get", Path: "/metrics"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := accessSpec(tc.u, "get", "/metrics")
			if !equality.Semantic.DeepEqual(got, tc.want) || (got.Extra == nil) != (tc.want.Extra == nil) {
				t.Errorf("accessSpec = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Every spec here asks something the others do not: no two share a key.
func TestAccessKeyDistinct(t *testing.T) {
	nr := func(verb, path string) *authzv1.NonResourceAttributes {
		return &authzv1.NonResourceAttributes{Verb: verb, Path: path}
	}
	metrics := nr("get", "/metrics")
	specs := map[string]authzv1.SubjectAccessReviewSpec{
		"user":                    {User: "alice", NonResourceAttributes: metrics},
		"another user":            {User: "bob", NonResourceAttributes: metrics},
		"user and UID":            {User: "alice", UID: "1", NonResourceAttributes: metrics},
		"name moved into UID":     {User: "alic", UID: "e1", NonResourceAttributes: metrics},
		"groups":                  {User: "alice", Groups: []string{"a", "readers"}, NonResourceAttributes: metrics},
		"one group with a comma":  {User: "alice", Groups: []string{"a,readers"}, NonResourceAttributes: metrics},
		"groups in another order": {User: "alice", Groups: []string{"readers", "a"}, NonResourceAttributes: metrics},
		"an empty group":          {User: "alice", Groups: []string{""}, NonResourceAttributes: metrics},
		"extra":                   {User: "alice", Extra: map[string]authzv1.ExtraValue{"scopes": {"metrics"}}, NonResourceAttributes: metrics},
		"extra split":             {User: "alice", Extra: map[string]authzv1.ExtraValue{"scopes": {"met", "rics"}}, NonResourceAttributes: metrics},
		"extra of another key":    {User: "alice", Extra: map[string]authzv1.ExtraValue{"scope": {"metrics"}}, NonResourceAttributes: metrics},
		"extra without values":    {User: "alice", Extra: map[string]authzv1.ExtraValue{"scopes": nil}, NonResourceAttributes: metrics},
		"two extra keys":          {User: "alice", Extra: map[string]authzv1.ExtraValue{"a": {"1"}, "b": {"2"}}, NonResourceAttributes: metrics},
		"two extra keys swapped":  {User: "alice", Extra: map[string]authzv1.ExtraValue{"a": {"2"}, "b": {"1"}}, NonResourceAttributes: metrics},
		"another verb":            {User: "alice", NonResourceAttributes: nr("post", "/metrics")},
		"another path":            {User: "alice", NonResourceAttributes: nr("get", "/debug/pprof/")},
		"verb moved into path":    {User: "alice", NonResourceAttributes: nr("ge", "t/metrics")},
		"user moved into verb":    {User: "alic", NonResourceAttributes: nr("eget", "/metrics")},
	}
	seen := map[[sha256.Size]byte]string{}
	for name, spec := range specs {
		key, ok := accessKey(spec)
		if !ok {
			t.Errorf("%s: no key", name)
			continue
		}
		if other, dup := seen[key]; dup {
			t.Errorf("%q and %q share a key", name, other)
		}
		seen[key] = name
	}
}

// What a review asks, and nothing else, makes its key: equal specs share
// it, however extra's map was built, and a long path is hashed too.
func TestAccessKeySame(t *testing.T) {
	a := authzv1.SubjectAccessReviewSpec{User: "alice", Groups: []string{"g"}, NonResourceAttributes: &authzv1.NonResourceAttributes{Verb: "get", Path: "/metrics"}}
	b := a
	b.Extra = map[string]authzv1.ExtraValue{}
	ka, _ := accessKey(a)
	kb, _ := accessKey(b)
	if ka != kb {
		t.Error("no extra and an empty extra have different keys")
	}
	x := authzv1.SubjectAccessReviewSpec{Extra: map[string]authzv1.ExtraValue{}, NonResourceAttributes: a.NonResourceAttributes}
	y := authzv1.SubjectAccessReviewSpec{Extra: map[string]authzv1.ExtraValue{}, NonResourceAttributes: a.NonResourceAttributes}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		x.Extra[k] = authzv1.ExtraValue{k}
	}
	for _, k := range []string{"h", "g", "f", "e", "d", "c", "b", "a"} {
		y.Extra[k] = authzv1.ExtraValue{k}
	}
	for range 20 { // map iteration order varies between ranges
		kx, _ := accessKey(x)
		ky, _ := accessKey(y)
		if kx != ky {
			t.Fatal("equal extra maps have different keys")
		}
	}
	long := a
	long.NonResourceAttributes = &authzv1.NonResourceAttributes{Verb: "get", Path: "/debug/pprof/" + strings.Repeat("x", 1<<20)}
	kl, _ := accessKey(long)
	if kl == ka {
		t.Error("a 1 MiB path has /metrics' key")
	}
}

func TestAccessKeyCovers(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec authzv1.SubjectAccessReviewSpec
		ok   bool
	}{
		{name: "non-resource", spec: authzv1.SubjectAccessReviewSpec{NonResourceAttributes: &authzv1.NonResourceAttributes{}}, ok: true},
		{name: "neither", spec: authzv1.SubjectAccessReviewSpec{}},
		{name: "resource", spec: authzv1.SubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{}}},
		{name: "both", spec: authzv1.SubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{}, NonResourceAttributes: &authzv1.NonResourceAttributes{}}},
	} {
		if _, ok := accessKey(tc.spec); ok != tc.ok {
			t.Errorf("%s: ok %v, want %v", tc.name, ok, tc.ok)
		}
	}
}

func TestEntryBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    authnv1.UserInfo
		want int
	}{
		{name: "nothing"},
		{name: "name and UID", u: authnv1.UserInfo{Username: "alice", UID: "123"}, want: 8},
		{name: "groups", u: authnv1.UserInfo{Groups: []string{"a", "bcd"}}, want: 2*stringHeader + 4},
		{name: "extra", u: authnv1.UserInfo{Extra: map[string]authnv1.ExtraValue{"ab": {"c", "de"}, "f": nil}},
			want: 2*extraSlot + 3 + 2*stringHeader + 3},
	} {
		if got := userBytes(tokenAnswer{user: tc.u, ok: true}); got != tc.want {
			t.Errorf("userBytes(%s) = %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := reasonBytes(accessAnswer{reason: "no rule"}); got != 7 {
		t.Errorf("reasonBytes = %d, want 7", got)
	}
}
