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
