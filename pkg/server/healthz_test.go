package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
)

// /healthz and /healthz/<name> are open to anyone who reaches the port:
// they say which check failed, never its error, which goes to the log.
func TestHealthzHidesCheckErrors(t *testing.T) {
	const secret = "dial unix /run/secret/driver.sock: permission denied"
	for _, path := range []string{"/healthz", "/healthz/csi"} {
		t.Run(path, func(t *testing.T) {
			var mu sync.Mutex
			var logged strings.Builder
			logger := funcr.New(func(prefix, args string) {
				mu.Lock()
				defer mu.Unlock()
				logged.WriteString(prefix + " " + args + "\n")
			}, funcr.Options{})
			h := &Health{}
			h.SetReady()
			h.AddCheck("csi", func(*http.Request) error { return errors.New(secret) })
			req := httptest.NewRequestWithContext(klog.NewContext(t.Context(), logger), http.MethodGet, path, nil)
			w := httptest.NewRecorder()
			if path == "/healthz" {
				h.ServeHTTP(w, req)
			} else {
				h.ServeCheck(w, req)
			}
			body := w.Body.String()
			if w.Code != http.StatusServiceUnavailable || !strings.Contains(body, "csi") {
				t.Errorf("GET %s: %d %q, want 503 naming the check", path, w.Code, body)
			}
			if strings.Contains(body, "permission denied") || strings.Contains(body, "/run/secret") {
				t.Errorf("GET %s shows the check's error: %q", path, body)
			}
			mu.Lock()
			defer mu.Unlock()
			if !strings.Contains(logged.String(), secret) || !strings.Contains(logged.String(), `"check"="csi"`) {
				t.Errorf("the check's error was not logged with its name: %q", logged.String())
			}
		})
	}
}
