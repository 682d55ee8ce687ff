package server

import (
	"cmp"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	certutil "k8s.io/client-go/util/cert"
)

func TestSecureValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    HTTPOptions
		err  string
	}{
		{name: "off", o: HTTPOptions{Addr: ":8080"}},
		{name: "off without an address", o: HTTPOptions{}},
		{name: "self-signed", o: HTTPOptions{Addr: ":8443", Secure: SecureOptions{Enabled: true}}},
		{name: "files", o: HTTPOptions{Addr: ":8443", Secure: SecureOptions{Enabled: true, CertFile: "c", KeyFile: "k"}}},
		{name: "certificate without key", o: HTTPOptions{Addr: ":8443", Secure: SecureOptions{Enabled: true, CertFile: "c"}}, err: "go together"},
		{name: "key without certificate", o: HTTPOptions{Addr: ":8443", Secure: SecureOptions{Enabled: true, KeyFile: "k"}}, err: "go together"},
		{name: "files without secure", o: HTTPOptions{Addr: ":8080", Secure: SecureOptions{CertFile: "c", KeyFile: "k"}}, err: "need --metrics-secure"},
		{name: "secure without an address", o: HTTPOptions{Secure: SecureOptions{Enabled: true}}, err: "needs an address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if (err != nil) != (tc.err != "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Validate() = %v, want an error with %q", err, tc.err)
			}
		})
	}
}

// fakeReviews is a clientset whose TokenReview knows two tokens, "reader"
// and "other" (their users' names), and whose SubjectAccessReview lets
// "reader" get /metrics and nothing else; authnErr and authzErr make them
// fail. calls counts the reviews asked.
func fakeReviews(authnErr, authzErr error, calls *int) *Reviews {
	client := fake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*calls++
		if authnErr != nil {
			return true, nil, authnErr
		}
		review := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if token := review.Spec.Token; token == "reader" || token == "other" {
			review.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: token, Groups: []string{"g"}}}
		}
		return true, review, nil
	})
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*calls++
		if authzErr != nil {
			return true, nil, authzErr
		}
		review := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		na := review.Spec.NonResourceAttributes
		review.Status.Allowed = review.Spec.User == "reader" && na != nil && na.Verb == "get" && na.Path == "/metrics" && review.Spec.ResourceAttributes == nil
		if !review.Status.Allowed {
			review.Status.Reason = "no rule"
		}
		return true, review, nil
	})
	return NewReviews(client)
}

func TestGuard(t *testing.T) {
	for _, tc := range []struct {
		name   string
		token  string
		scheme string // Bearer unless set
		path   string
		authn  error
		authz  error
		status int
	}{
		{name: "anonymous", path: "/metrics", status: http.StatusUnauthorized},
		{name: "unknown token", token: "nobody", path: "/metrics", status: http.StatusUnauthorized},
		{name: "another scheme", token: "reader", scheme: "Basic", path: "/metrics", status: http.StatusUnauthorized},
		{name: "TokenReview fails", token: "reader", path: "/metrics", authn: errors.New("down"), status: http.StatusUnauthorized},
		{name: "not allowed", token: "other", path: "/metrics", status: http.StatusForbidden},
		{name: "allowed path only", token: "reader", path: "/debug/pprof/", status: http.StatusForbidden},
		{name: "SubjectAccessReview fails", token: "reader", path: "/metrics", authz: errors.New("down"), status: http.StatusInternalServerError},
		{name: "allowed", token: "reader", path: "/metrics", status: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			h := fakeReviews(tc.authn, tc.authz, &calls).Guard(
				http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "passed") }))
			r, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://x"+tc.path, nil)
			if tc.token != "" {
				scheme := cmp.Or(tc.scheme, "bearer")
				r.Header.Set("Authorization", scheme+" "+tc.token)
			}
			w := &recorder{header: http.Header{}, status: http.StatusOK}
			h.ServeHTTP(w, r)
			if w.status != tc.status {
				t.Errorf("status %d, want %d (%s)", w.status, tc.status, w.body.String())
			}
			if passed := w.body.String() == "passed"; passed != (tc.status == http.StatusOK) {
				t.Errorf("reached the handler: %v, status %d", passed, w.status)
			}
		})
	}
}

type recorder struct {
	header http.Header
	status int
	body   strings.Builder
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(status int)      { r.status = status }

func getTLS(t *testing.T, url, token string) int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test's own certificate
	r, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.ReadAll(resp.Body)
	return resp.StatusCode
}

func TestServeSecure(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	var calls int
	guard := fakeReviews(nil, nil, &calls).Guard
	for name, secure := range map[string]SecureOptions{
		"self-signed": {Enabled: true},
		"files":       {Enabled: true, CertFile: certFile, KeyFile: keyFile},
	} {
		t.Run(name, func(t *testing.T) {
			health := &Health{}
			health.SetReady()
			addr, err := Serve(t.Context(), HTTPOptions{Addr: "127.0.0.1:0", Registry: NewRegistry(), Health: health, Pprof: true, Secure: secure, Guard: guard})
			if err != nil {
				t.Fatal(err)
			}
			base := "https://" + addr
			for _, c := range []struct {
				path, token string
				want        int
			}{
				{"/healthz", "", http.StatusOK},
				{"/metrics", "", http.StatusUnauthorized},
				{"/metrics", "other", http.StatusForbidden},
				{"/metrics", "reader", http.StatusOK},
				{"/debug/pprof/", "", http.StatusUnauthorized},
				{"/debug/pprof/", "reader", http.StatusForbidden},
			} {
				if got := getTLS(t, base+c.path, c.token); got != c.want {
					t.Errorf("%s with token %q: %d, want %d", c.path, c.token, got, c.want)
				}
			}
		})
	}
	if _, err := Serve(t.Context(), HTTPOptions{Addr: "127.0.0.1:0", Registry: NewRegistry(), Secure: SecureOptions{Enabled: true}}); err == nil {
		t.Error("secure without a guard: no error")
	}
	missing := SecureOptions{Enabled: true, CertFile: filepath.Join(dir, "none"), KeyFile: keyFile}
	if _, err := Serve(t.Context(), HTTPOptions{Addr: "127.0.0.1:0", Registry: NewRegistry(), Secure: missing, Guard: guard}); err == nil || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Errorf("missing certificate file: %v", err)
	}
}
