package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
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

// fakeAuthn knows one token, whose user is "reader".
type fakeAuthn struct{ err error }

func (f fakeAuthn) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	if f.err != nil {
		return nil, false, f.err
	}
	switch r.Header.Get("Authorization") {
	case "Bearer reader":
		return &authenticator.Response{User: &user.DefaultInfo{Name: "reader"}}, true, nil
	case "Bearer other":
		return &authenticator.Response{User: &user.DefaultInfo{Name: "other"}}, true, nil
	}
	return nil, false, nil
}

// fakeAuthz lets "reader" get /metrics and nothing else.
type fakeAuthz struct{ err error }

func (f fakeAuthz) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if f.err != nil {
		return authorizer.DecisionNoOpinion, "", f.err
	}
	if a.GetUser().GetName() == "reader" && a.GetVerb() == "get" && a.GetPath() == "/metrics" && !a.IsResourceRequest() {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no rule", nil
}

func TestGuard(t *testing.T) {
	for _, tc := range []struct {
		name   string
		token  string
		path   string
		authn  error
		authz  error
		status int
	}{
		{name: "anonymous", path: "/metrics", status: http.StatusUnauthorized},
		{name: "unknown token", token: "nobody", path: "/metrics", status: http.StatusUnauthorized},
		{name: "TokenReview fails", token: "reader", path: "/metrics", authn: errors.New("down"), status: http.StatusUnauthorized},
		{name: "not allowed", token: "other", path: "/metrics", status: http.StatusForbidden},
		{name: "allowed path only", token: "reader", path: "/debug/pprof/", status: http.StatusForbidden},
		{name: "SubjectAccessReview fails", token: "reader", path: "/metrics", authz: errors.New("down"), status: http.StatusInternalServerError},
		{name: "allowed", token: "reader", path: "/metrics", status: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Reviews{Authenticator: fakeAuthn{tc.authn}, Authorizer: fakeAuthz{tc.authz}}.Guard(
				http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "passed") }))
			r, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://x"+tc.path, nil)
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
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
	guard := Reviews{Authenticator: fakeAuthn{}, Authorizer: fakeAuthz{}}.Guard
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
