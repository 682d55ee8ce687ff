package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestServe(t *testing.T) {
	for _, pprof := range []bool{false, true} {
		ctx, cancel := context.WithCancel(t.Context())
		health := &Health{}
		addr, err := Serve(ctx, HTTPOptions{Addr: "127.0.0.1:0", Registry: NewRegistry(), Health: health, Pprof: pprof})
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + addr
		if code, _ := get(t, base+"/healthz"); code != http.StatusServiceUnavailable {
			t.Errorf("healthz before ready: %d", code)
		}
		health.SetReady()
		if code, body := get(t, base+"/healthz"); code != http.StatusOK || !strings.Contains(body, "ok") {
			t.Errorf("healthz when ready: %d %q", code, body)
		}
		health.AddCheck("lease", func(*http.Request) error { return io.ErrUnexpectedEOF })
		if code, body := get(t, base+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "lease") {
			t.Errorf("healthz with a failing check: %d %q", code, body)
		}
		if code, body := get(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
			t.Errorf("metrics: %d", code)
		}
		want := http.StatusNotFound
		if pprof {
			want = http.StatusOK
		}
		if code, _ := get(t, base+"/debug/pprof/"); code != want {
			t.Errorf("pprof %v: /debug/pprof/ answered %d, want %d", pprof, code, want)
		}
		cancel()
	}
	if addr, err := Serve(t.Context(), HTTPOptions{}); addr != "" || err != nil {
		t.Errorf("no address: got %q, %v", addr, err)
	}
}

// EP's paths: the metrics on --metrics-path, and one check alone on
// /healthz/<name> (EP's liveness probe asks /healthz/leader-election).
func TestServePaths(t *testing.T) {
	tests := []struct {
		name        string
		metricsPath string
		checks      map[string]error // added before the requests
		path        string
		wantCode    int
		wantBody    string
	}{
		{name: "default metrics path", path: "/metrics", wantCode: http.StatusOK, wantBody: "go_goroutines"},
		{name: "custom metrics path", metricsPath: "/custom", path: "/custom", wantCode: http.StatusOK, wantBody: "go_goroutines"},
		{name: "custom metrics path moves them", metricsPath: "/custom", path: "/metrics", wantCode: http.StatusNotFound},
		{name: "a passing check alone", checks: map[string]error{"leader-election": nil, "other": io.EOF},
			path: "/healthz/leader-election", wantCode: http.StatusOK, wantBody: "ok"},
		{name: "a failing check alone", checks: map[string]error{"leader-election": io.ErrUnexpectedEOF},
			path: "/healthz/leader-election", wantCode: http.StatusServiceUnavailable, wantBody: "leader-election: failed"},
		{name: "every check on /healthz", checks: map[string]error{"leader-election": nil, "other": io.EOF},
			path: "/healthz", wantCode: http.StatusServiceUnavailable, wantBody: "other: failed"},
		{name: "a check never added", checks: map[string]error{"other": nil}, path: "/healthz/leader-election", wantCode: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			health := &Health{}
			health.SetReady()
			addr, err := Serve(t.Context(), HTTPOptions{Addr: "127.0.0.1:0", MetricsPath: tt.metricsPath, Registry: NewRegistry(), Health: health})
			if err != nil {
				t.Fatal(err)
			}
			for name, err := range tt.checks {
				health.AddCheck(name, func(*http.Request) error { return err })
			}
			code, body := get(t, "http://"+addr+tt.path)
			if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
				t.Errorf("GET %s: %d %q, want %d with %q", tt.path, code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
	for _, bad := range []string{"metrics", "/healthz", "/healthz/x"} {
		if _, err := Serve(t.Context(), HTTPOptions{Addr: "127.0.0.1:0", MetricsPath: bad, Registry: NewRegistry()}); err == nil {
			t.Errorf("metrics path %q was accepted", bad)
		}
	}
}
