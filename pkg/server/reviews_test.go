package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
)

// fakeAPI is a clientset whose TokenReview knows the tokens of users and
// whose SubjectAccessReview allows what allow says, with reason as the
// reason of every answer; it counts the reviews asked of each kind.
type fakeAPI struct {
	users  map[string]authnv1.UserInfo
	allow  func(authzv1.SubjectAccessReviewSpec) bool
	reason string

	mu           sync.Mutex
	tokenReviews int
	sars         int
}

func (f *fakeAPI) reviews(t *testing.T) *Reviews {
	t.Helper()
	client := fake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.tokenReviews++
		if u, ok := f.users[review.Spec.Token]; ok {
			review.Status = authnv1.TokenReviewStatus{Authenticated: true, User: u}
		}
		return true, review, nil
	})
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.sars++
		review.Status.Allowed = f.allow(review.Spec)
		review.Status.Reason = f.reason
		return true, review, nil
	})
	return NewReviews(client)
}

func (f *fakeAPI) asked() (tokenReviews, sars int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokenReviews, f.sars
}

// status is what r's Guard answers a GET of path with token.
func status(t *testing.T, r *Reviews, token, path string) int {
	t.Helper()
	w := &recorder{header: http.Header{}, status: http.StatusOK}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://x", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Path = path
	req.Header.Set("Authorization", "Bearer "+token)
	r.Guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, req)
	return w.status
}

// Two tokens of one user that differ in extra (a scoped token and an
// unscoped one) are two reviews: one's allow is not the other's.
func TestReviewsKeyIncludesExtra(t *testing.T) {
	for _, tc := range []struct {
		name               string
		allowed, forbidden map[string][]string
	}{
		{name: "scoped token after the unscoped one", allowed: nil, forbidden: map[string][]string{"scopes": {"none"}}},
		{name: "another value of the same key", allowed: map[string][]string{"scopes": {"metrics"}}, forbidden: map[string][]string{"scopes": {"none"}}},
		{name: "another key with the same value", allowed: map[string][]string{"scopes": {"metrics"}}, forbidden: map[string][]string{"scope": {"metrics"}}},
		{name: "values split differently", allowed: map[string][]string{"scopes": {"metrics"}}, forbidden: map[string][]string{"scopes": {"met", "rics"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &fakeAPI{
				users: map[string]authnv1.UserInfo{
					"allowed":   {Username: "alice", UID: "1", Extra: extraOf(tc.allowed)},
					"forbidden": {Username: "alice", UID: "1", Extra: extraOf(tc.forbidden)},
				},
				allow: func(s authzv1.SubjectAccessReviewSpec) bool { return sameExtra(s.Extra, tc.allowed) },
			}
			r := api.reviews(t)
			if got := status(t, r, "allowed", "/metrics"); got != http.StatusOK {
				t.Fatalf("the allowed token: %d", got)
			}
			if got := status(t, r, "forbidden", "/metrics"); got != http.StatusForbidden {
				t.Errorf("the same user with extra %v after one with %v: %d, want 403", tc.forbidden, tc.allowed, got)
			}
		})
	}
}

// Groups are a list: ["a", "readers"] and ["a,readers"] are two users.
func TestReviewsGroupsDoNotCollide(t *testing.T) {
	users := map[string]authnv1.UserInfo{
		"two": {Username: "bob", Groups: []string{"a", "readers"}},
		"one": {Username: "bob", Groups: []string{"a,readers"}},
	}
	allow := func(s authzv1.SubjectAccessReviewSpec) bool { return slices.Contains(s.Groups, "readers") }
	for _, order := range [][]string{{"two", "one"}, {"one", "two"}} {
		t.Run(strings.Join(order, " then "), func(t *testing.T) {
			r := (&fakeAPI{users: users, allow: allow}).reviews(t)
			for _, token := range order {
				want := http.StatusForbidden
				if token == "two" {
					want = http.StatusOK
				}
				if got := status(t, r, token, "/metrics"); got != want {
					t.Errorf("groups %q: %d, want %d", users[token].Groups, got, want)
				}
			}
		})
	}
}

// KCM's delegated authentication and authorization remember a token's
// user, an allow and a denial for 10 seconds each; so do Reviews.
func TestReviewsKCMTTLs(t *testing.T) {
	api := &fakeAPI{
		users: map[string]authnv1.UserInfo{"reader": {Username: "reader"}},
		allow: func(s authzv1.SubjectAccessReviewSpec) bool { return s.NonResourceAttributes.Path == "/metrics" },
	}
	r := api.reviews(t)
	start := time.Unix(1000, 0)
	now := start
	r.now = func() time.Time { return now }
	for _, step := range []struct {
		at                 time.Duration
		path               string
		status             int
		tokenReviews, sars int
	}{
		{0, "/metrics", http.StatusOK, 1, 1},
		{0, "/debug/pprof/", http.StatusForbidden, 1, 2},
		{9 * time.Second, "/metrics", http.StatusOK, 1, 2}, // all remembered
		{9 * time.Second, "/debug/pprof/", http.StatusForbidden, 1, 2},
		{10 * time.Second, "/metrics", http.StatusOK, 2, 3}, // all asked again
		{10 * time.Second, "/debug/pprof/", http.StatusForbidden, 2, 4},
		{19 * time.Second, "/debug/pprof/", http.StatusForbidden, 2, 4},
		{20 * time.Second, "/debug/pprof/", http.StatusForbidden, 3, 5},
	} {
		now = start.Add(step.at)
		got := status(t, r, "reader", step.path)
		tokenReviews, sars := api.asked()
		if got != step.status || tokenReviews != step.tokenReviews || sars != step.sars {
			t.Fatalf("%s at %s: %d after %d TokenReviews and %d SubjectAccessReviews, want %d after %d and %d",
				step.path, step.at, got, tokenReviews, sars, step.status, step.tokenReviews, step.sars)
		}
	}
}

func extraOf(m map[string][]string) map[string]authnv1.ExtraValue {
	if m == nil {
		return nil
	}
	out := map[string]authnv1.ExtraValue{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sameExtra(got map[string]authzv1.ExtraValue, want map[string][]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			return false
		}
	}
	return true
}

// The caches hold at most cacheBytes each, whatever the API server
// answers, and the access cache holds no part of the client's path: a
// token the API server accepts cannot make them grow past their budget.
func TestReviewsBoundedInBytes(t *testing.T) {
	t.Run("paths at the header limit", func(t *testing.T) {
		api := &fakeAPI{users: map[string]authnv1.UserInfo{"reader": {Username: "reader"}},
			allow: func(authzv1.SubjectAccessReviewSpec) bool { return false }, reason: "no rule"}
		r := api.reviews(t)
		const n = 32
		for i := range n {
			path := fmt.Sprintf("/debug/pprof/%d/%s", i, strings.Repeat("x", 1<<20))
			if got := status(t, r, "reader", path); got != http.StatusForbidden {
				t.Fatalf("request %d: %d", i, got)
			}
		}
		if entries, bytes := r.access.held(); entries != n || bytes != n*(entryOverhead+len("no rule")) {
			t.Errorf("access cache: %d entries of %d bytes after %d paths of 1 MiB, want %d of %d",
				entries, bytes, n, n, n*(entryOverhead+len("no rule")))
		}
	})
	t.Run("large answers", func(t *testing.T) {
		big := strings.Repeat("g", 64<<10)
		api := &fakeAPI{users: map[string]authnv1.UserInfo{},
			allow: func(authzv1.SubjectAccessReviewSpec) bool { return false }, reason: big}
		const n = 100 // 6.4 MiB of groups and as much of reasons, asked
		for i := range n {
			api.users[fmt.Sprint("token-", i)] = authnv1.UserInfo{Username: fmt.Sprint("user-", i), Groups: []string{big}}
		}
		r := api.reviews(t)
		for i := range n {
			if got := status(t, r, fmt.Sprint("token-", i), "/metrics"); got != http.StatusForbidden {
				t.Fatalf("token %d: %d", i, got)
			}
		}
		for name, c := range map[string]interface{ held() (int, int) }{"token": r.tokens, "access": r.access} {
			entries, bytes := c.held()
			if bytes > cacheBytes || entries == 0 || entries >= n {
				t.Errorf("%s cache: %d entries of %d bytes, want some, of at most %d bytes", name, entries, bytes, cacheBytes)
			}
		}
		// The newest answers are kept: the last token is not asked again.
		tokenReviews, sars := api.asked()
		if status(t, r, fmt.Sprint("token-", n-1), "/metrics"); !sameAsked(api, tokenReviews, sars) {
			t.Error("the newest answers were dropped")
		}
	})
}

func sameAsked(api *fakeAPI, tokenReviews, sars int) bool {
	t, s := api.asked()
	return t == tokenReviews && s == sars
}

// An expired answer is dropped, not kept until the cache is full.
func TestReviewsDropExpired(t *testing.T) {
	api := &fakeAPI{users: map[string]authnv1.UserInfo{},
		allow: func(authzv1.SubjectAccessReviewSpec) bool { return true }}
	const n = 20
	for i := range n + 1 {
		api.users[fmt.Sprint("token-", i)] = authnv1.UserInfo{Username: fmt.Sprint("user-", i)}
	}
	r := api.reviews(t)
	start := time.Unix(1000, 0)
	now := start
	r.now = func() time.Time { return now }
	for i := range n {
		status(t, r, fmt.Sprint("token-", i), "/metrics")
	}
	if tokens, _ := r.tokens.held(); tokens != n {
		t.Fatalf("%d tokens held, want %d", tokens, n)
	}
	now = start.Add(max(tokenCacheTTL, accessCacheTTL))
	status(t, r, fmt.Sprint("token-", n), "/metrics")
	tokens, tokenBytes := r.tokens.held()
	access, accessBytes := r.access.held()
	if tokens != 1 || access != 1 || tokenBytes != entryOverhead+len("user-20") || accessBytes != entryOverhead {
		t.Errorf("after the ttl and one more request: %d tokens (%d bytes) and %d access answers (%d bytes) held, want 1 and 1",
			tokens, tokenBytes, access, accessBytes)
	}
}

// Reviews ask an API server over HTTP within reviewTimeout: the reviews
// it receives carry the user's UID, groups and extra, and the answers
// decide.
func TestReviewsOverHTTP(t *testing.T) {
	var mu sync.Mutex
	var asked []authzv1.SubjectAccessReviewSpec
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch req.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var review authnv1.TokenReview
			if err := json.NewDecoder(req.Body).Decode(&review); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			review.APIVersion, review.Kind = "authentication.k8s.io/v1", "TokenReview"
			if review.Spec.Token == "reader" {
				review.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{
					Username: "reader", UID: "7", Groups: []string{"g"}, Extra: map[string]authnv1.ExtraValue{"scopes": {"metrics"}}}}
			}
			_ = json.NewEncoder(w).Encode(review)
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var review authzv1.SubjectAccessReview
			if err := json.NewDecoder(req.Body).Decode(&review); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			asked = append(asked, review.Spec)
			mu.Unlock()
			review.APIVersion, review.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
			review.Status.Allowed = review.Spec.NonResourceAttributes.Path == "/metrics"
			_ = json.NewEncoder(w).Encode(review)
		default:
			http.NotFound(w, req)
		}
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL,
		ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	r := NewReviews(client)
	for _, c := range []struct {
		token, path string
		want        int
	}{
		{"reader", "/metrics", http.StatusOK},
		{"reader", "/debug/pprof/", http.StatusForbidden},
		{"nobody", "/metrics", http.StatusUnauthorized},
	} {
		if got := status(t, r, c.token, c.path); got != c.want {
			t.Errorf("%s with %q: %d, want %d", c.path, c.token, got, c.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := accessSpec(authnv1.UserInfo{Username: "reader", UID: "7", Groups: []string{"g"}, Extra: map[string]authnv1.ExtraValue{"scopes": {"metrics"}}}, "get", "/metrics")
	if len(asked) != 2 || !equality.Semantic.DeepEqual(asked[0], want) {
		t.Errorf("SubjectAccessReviews asked: %+v, want first %+v", asked, want)
	}
}

// A TokenReview that fails is logged (at V(2): a client's doing, not the
// component's) and answered 401.
func TestReviewsLogFailedTokenReview(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("API server down")
	})
	var mu sync.Mutex
	var logged strings.Builder
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 2})
	w := &recorder{header: http.Header{}, status: http.StatusOK}
	req, _ := http.NewRequestWithContext(klog.NewContext(t.Context(), logger), http.MethodGet, "https://x/metrics", nil)
	req.Header.Set("Authorization", "Bearer reader")
	NewReviews(client).Guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, req)
	mu.Lock()
	defer mu.Unlock()
	if w.status != http.StatusUnauthorized || !strings.Contains(logged.String(), "API server down") {
		t.Errorf("status %d, logged %q; want 401 and the error logged", w.status, logged.String())
	}
}
