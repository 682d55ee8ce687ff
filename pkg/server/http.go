package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// Health answers /healthz: ready once started, and every added check passes.
type Health struct {
	ready  atomic.Bool
	mu     sync.Mutex
	checks map[string]func(*http.Request) error
}

// SetReady marks the process started.
func (h *Health) SetReady() {
	if h != nil {
		h.ready.Store(true)
	}
}

// AddCheck adds a named check.
func (h *Health) AddCheck(name string, check func(*http.Request) error) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.checks == nil {
		h.checks = map[string]func(*http.Request) error{}
	}
	h.checks[name] = check
}

func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.ready.Load() {
		http.Error(w, "not started", http.StatusServiceUnavailable)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, check := range h.checks {
		if err := check(r); err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", name, err), http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintln(w, "ok")
}

// NewRegistry is a Prometheus registry with the Go and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Serve serves /metrics and /healthz on addr until ctx ends. An empty addr
// serves nothing. It returns once listening, with the bound address.
func Serve(ctx context.Context, addr string, reg *prometheus.Registry, health *Health) (string, error) {
	if addr == "" {
		return "", nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("/healthz", health)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--http-endpoint: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "HTTP endpoint failed")
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	klog.FromContext(ctx).Info("Serving metrics and health", "address", ln.Addr().String())
	return ln.Addr().String(), nil
}
