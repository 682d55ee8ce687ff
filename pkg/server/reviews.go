package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
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

// Review caching, as kube-controller-manager's delegated authentication
// and authorization (k8s.io/apiserver's DelegatingAuthenticationOptions
// CacheTTL, DelegatingAuthorizationOptions AllowCacheTTL and DenyCacheTTL):
// a token's answer, an allowed request's and a denied one's for 10 seconds
// each. Each cache holds at most cacheBytes (see ttlCache).
const (
	tokenCacheTTL  = 10 * time.Second
	accessCacheTTL = 10 * time.Second
	reviewTimeout  = 10 * time.Second
	cacheBytes     = 2 << 20
)

// Reviews asks the API server who a bearer token's user is (TokenReview)
// and whether that user may use a verb on a non-resource path
// (SubjectAccessReview), and remembers each answer for a while. It is
// client-go's typed clients and two caches: k8s.io/apiserver's delegating
// authenticator and authorizer do the same but double the binaries' size.
type Reviews struct {
	client kubernetes.Interface
	now    func() time.Time

	tokens *ttlCache[[sha256.Size]byte, tokenAnswer]  // by the token's hash
	access *ttlCache[[sha256.Size]byte, accessAnswer] // by accessKey
}

type tokenAnswer struct {
	user authnv1.UserInfo
	ok   bool
}

type accessAnswer struct {
	allowed bool
	reason  string
}

// NewReviews asks the API server through client.
func NewReviews(client kubernetes.Interface) *Reviews {
	return &Reviews{client: client, now: time.Now,
		tokens: newTTLCache[[sha256.Size]byte](tokenCacheTTL, cacheBytes, userBytes),
		access: newTTLCache[[sha256.Size]byte](accessCacheTTL, cacheBytes, reasonBytes)}
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
	if a, found := r.tokens.get(key, r.now()); found {
		return a.user, a.ok, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := r.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, false, fmt.Errorf("TokenReview: %w", err)
	}
	a := tokenAnswer{user: review.Status.User, ok: review.Status.Authenticated && review.Status.Error == ""}
	r.tokens.put(key, a, r.now())
	return a.user, a.ok, nil
}

// allowed says whether u may use verb on path (a non-resource URL), with
// the API server's reason when not; err when it could not be asked.
func (r *Reviews) allowed(ctx context.Context, u authnv1.UserInfo, verb, path string) (bool, string, error) {
	spec := accessSpec(u, verb, path)
	key, cacheable := accessKey(spec)
	if a, found := r.access.get(key, r.now()); cacheable && found {
		return a.allowed, a.reason, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx,
		&authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	a := accessAnswer{allowed: review.Status.Allowed && !review.Status.Denied, reason: review.Status.Reason}
	if cacheable {
		r.access.put(key, a, r.now())
	}
	return a.allowed, a.reason, nil
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
