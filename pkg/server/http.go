package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// Health answers /healthz: ready once started, and every added check
// passes. A failed check's answer names it; its error is logged, never
// answered.
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

// ServeCheck answers /healthz/<name>, as csi-lib-utils serves
// /healthz/leader-election: the named check alone. A check that was never
// added is not found.
func (h *Health) ServeCheck(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/healthz/")
	h.mu.Lock()
	check, ok := h.checks[name]
	h.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if err := check(r); err != nil {
		checkFailed(w, r, name, err)
		return
	}
	fmt.Fprintln(w, "ok")
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
			checkFailed(w, r, name, err)
			return
		}
	}
	fmt.Fprintln(w, "ok")
}

// checkFailed answers 503 naming the failed check, and logs its error:
// /healthz is open to whoever reaches the port, so the answer holds no
// more than the check's name.
func checkFailed(w http.ResponseWriter, r *http.Request, name string, err error) {
	klog.FromContext(r.Context()).Error(err, "Health check failed", "check", name)
	http.Error(w, name+": failed", http.StatusServiceUnavailable)
}

// NewRegistry is a Prometheus registry with the Go and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// HTTPOptions say what the HTTP endpoint serves.
type HTTPOptions struct {
	// Addr is host:port (--http-endpoint); empty serves nothing.
	Addr string
	// MetricsPath is where the metrics are served (--metrics-path);
	// empty is /metrics.
	MetricsPath string
	Registry    *prometheus.Registry
	Health      *Health
	// Pprof adds /debug/pprof/ (--enable-pprof).
	Pprof bool
	// Secure serves HTTPS with the metrics and profiles behind Guard
	// (--metrics-secure).
	Secure SecureOptions
	// Guard lets a request reach the metrics or profiles when Secure is
	// enabled (Reviews.Guard of NewReviews); it must then be set.
	Guard Guard
}

// Validate checks the address and the metrics path, without listening: an
// address Serve could not even try (not host:port), or a metrics path that
// does not start with / or is under /healthz, is an error. An empty address
// serves nothing, and an empty path is /metrics. The secure settings are
// checked by SecureOptions.Validate.
func (o HTTPOptions) Validate() error {
	if o.Addr == "" {
		return o.Secure.Validate(o.Addr)
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return fmt.Errorf("--http-endpoint=%s: %w", o.Addr, err)
	}
	if p := o.MetricsPath; p != "" && (!strings.HasPrefix(p, "/") || p == "/healthz" || strings.HasPrefix(p, "/healthz/")) {
		return fmt.Errorf("metrics path %q: must start with / and not be under /healthz", p)
	}
	return o.Secure.Validate(o.Addr)
}

// Serve serves the metrics (Registry's and client-go's, see Gatherer),
// /healthz (every check), /healthz/<check> (one check) and, on request,
// /debug/pprof/ until ctx ends. With Secure enabled it serves HTTPS and
// the metrics and profiles pass through Guard; /healthz stays open. It
// returns once listening, with the bound address.
func Serve(ctx context.Context, o HTTPOptions) (string, error) {
	if o.Addr == "" {
		return "", nil
	}
	if err := o.Validate(); err != nil {
		return "", err
	}
	if o.MetricsPath == "" {
		o.MetricsPath = "/metrics"
	}
	if o.Health == nil {
		o.Health = &Health{}
	}
	guard := func(h http.Handler) http.Handler { return h }
	if o.Secure.Enabled {
		if o.Guard == nil {
			return "", errors.New("--metrics-secure: no guard for the metrics")
		}
		guard = o.Guard
	}
	mux := http.NewServeMux()
	mux.Handle(o.MetricsPath, guard(promhttp.HandlerFor(Gatherer(o.Registry), promhttp.HandlerOpts{Registry: o.Registry})))
	mux.Handle("/healthz", o.Health)
	mux.HandleFunc("/healthz/", o.Health.ServeCheck)
	if o.Pprof {
		mux.Handle("/debug/pprof/", guard(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", guard(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", guard(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", guard(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", guard(http.HandlerFunc(pprof.Trace)))
	}
	var ln net.Listener
	var err error
	if o.Secure.Enabled {
		ln, err = listenTLS(ctx, o.Addr, o.Secure)
	} else if ln, err = net.Listen("tcp", o.Addr); err != nil {
		err = fmt.Errorf("--http-endpoint: %w", err)
	}
	if err != nil {
		return "", err
	}
	// Requests carry ctx's logger, not its end: Shutdown lets them finish.
	base := klog.NewContext(context.Background(), klog.FromContext(ctx))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return base }}
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
	klog.FromContext(ctx).Info("Serving metrics and health", "address", ln.Addr().String(), "metricsPath", o.MetricsPath, "secure", o.Secure.Enabled)
	return ln.Addr().String(), nil
}
