package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Guard wraps a handler so that only an authenticated and authorized
// request reaches it.
type Guard func(http.Handler) http.Handler

// Review caching, as kube-controller-manager's delegated authentication and
// authorization: a token's answer for a minute, an allowed request's for
// five and a denied one's for thirty seconds. A cache past maxCached
// entries drops its expired ones, and all of them if that is not enough.
const (
	tokenCacheTTL = time.Minute
	allowCacheTTL = 5 * time.Minute
	denyCacheTTL  = 30 * time.Second
	reviewTimeout = 10 * time.Second
	maxCached     = 4096
)

// Reviews asks the API server who a bearer token's user is (TokenReview)
// and whether that user may use a verb on a non-resource path
// (SubjectAccessReview), and remembers each answer for a while. It is
// client-go's typed clients and two maps: k8s.io/apiserver's delegating
// authenticator and authorizer do the same but double the binaries' size.
type Reviews struct {
	client kubernetes.Interface
	now    func() time.Time

	mu     sync.Mutex
	tokens map[[sha256.Size]byte]tokenAnswer // by the token's hash
	access map[string]accessAnswer           // by user, groups, verb and path
}

type tokenAnswer struct {
	user  authnv1.UserInfo
	ok    bool
	until time.Time
}

type accessAnswer struct {
	allowed bool
	reason  string
	until   time.Time
}

// NewReviews asks the API server through client.
func NewReviews(client kubernetes.Interface) *Reviews {
	return &Reviews{client: client, now: time.Now, tokens: map[[sha256.Size]byte]tokenAnswer{}, access: map[string]accessAnswer{}}
}

// bearer is the request's bearer token, "" for none.
func bearer(req *http.Request) string {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// user is the token's user, ok false for a token the API server does not
// accept; err when it could not be asked.
func (r *Reviews) user(ctx context.Context, token string) (authnv1.UserInfo, bool, error) {
	key := sha256.Sum256([]byte(token))
	r.mu.Lock()
	a, found := r.tokens[key]
	r.mu.Unlock()
	if found && r.now().Before(a.until) {
		return a.user, a.ok, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := r.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, false, fmt.Errorf("TokenReview: %w", err)
	}
	a = tokenAnswer{user: review.Status.User, ok: review.Status.Authenticated && review.Status.Error == "", until: r.now().Add(tokenCacheTTL)}
	r.mu.Lock()
	prune(r.tokens, r.now(), func(a tokenAnswer) time.Time { return a.until })
	r.tokens[key] = a
	r.mu.Unlock()
	return a.user, a.ok, nil
}

// allowed says whether u may use verb on path (a non-resource URL), with
// the API server's reason when not; err when it could not be asked.
func (r *Reviews) allowed(ctx context.Context, u authnv1.UserInfo, verb, path string) (bool, string, error) {
	groups := slices.Clone(u.Groups)
	slices.Sort(groups)
	key := strings.Join([]string{u.Username, u.UID, strings.Join(groups, ","), verb, path}, "\x00")
	r.mu.Lock()
	a, found := r.access[key]
	r.mu.Unlock()
	if found && r.now().Before(a.until) {
		return a.allowed, a.reason, nil
	}
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	ttl := denyCacheTTL
	if review.Status.Allowed {
		ttl = allowCacheTTL
	}
	a = accessAnswer{allowed: review.Status.Allowed && !review.Status.Denied, reason: review.Status.Reason, until: r.now().Add(ttl)}
	r.mu.Lock()
	prune(r.access, r.now(), func(a accessAnswer) time.Time { return a.until })
	r.access[key] = a
	r.mu.Unlock()
	return a.allowed, a.reason, nil
}

// prune keeps a cache under maxCached entries: past it, the expired go,
// and if that is not enough, all.
func prune[K comparable, V any](m map[K]V, now time.Time, until func(V) time.Time) {
	if len(m) < maxCached {
		return
	}
	for k, v := range m {
		if !now.Before(until(v)) {
			delete(m, k)
		}
	}
	if len(m) >= maxCached {
		clear(m)
	}
}

// Guard answers 401 to a request without a user (no bearer token, or one
// TokenReview does not accept or could not review), 403 to one whose user
// may not (the verb is the lower-cased method: get for GET), 500 when the
// SubjectAccessReview fails, and otherwise passes the request to next.
func (r *Reviews) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		logger := klog.FromContext(req.Context())
		token := bearer(req)
		if token == "" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		u, ok, err := r.user(req.Context(), token)
		if err != nil {
			logger.V(2).Info("Metrics request not authenticated", "path", req.URL.Path, "err", err)
		}
		if err != nil || !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(req.Method)
		allowed, reason, err := r.allowed(req.Context(), u, verb, req.URL.Path)
		if err != nil {
			logger.Error(err, "Metrics request authorization failed", "user", u.Username, "path", req.URL.Path)
			http.Error(w, "Authorization failed", http.StatusInternalServerError)
			return
		}
		if !allowed {
			logger.V(2).Info("Metrics request forbidden", "user", u.Username, "path", req.URL.Path, "reason", reason)
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", u.Username, verb, req.URL.Path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	})
}
