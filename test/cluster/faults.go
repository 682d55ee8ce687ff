package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
)

// The kinds of fault the proxy injects.
const (
	// FaultError answers 500 InternalError without forwarding: nothing
	// was written.
	FaultError = "error"
	// FaultConflict answers 409 Conflict without forwarding (updates and
	// patches only): nothing was written.
	FaultConflict = "conflict"
	// FaultErrorAfter forwards the request and, when the API server
	// accepted it, answers 500 InternalError anyway: the write happened but
	// the client believes it failed.
	FaultErrorAfter = "error-after-write"
)

// FaultOptions shape a FaultProxy.
type FaultOptions struct {
	// Fraction of eligible writes (POST, PUT, PATCH, DELETE) that fail.
	// Each failing write gets one of the kinds that apply to it, at
	// random: FaultError, FaultErrorAfter, and for PUT and PATCH also
	// FaultConflict.
	Fraction float64
	// Seed of the proxy's random choices.
	Seed uint64
	// Spare lists resources (as "group/resource", "" for the core group)
	// whose writes are never failed. Default: leases, whose failures only
	// make leader election flap (the chaos run already kills leaders), and
	// events, which carry no state.
	Spare []string
}

// FaultProxy is a reverse proxy in front of kube-apiserver that fails a
// fraction of writes. It serves HTTPS on loopback and forwards over TLS
// with the client's own Authorization header, so a component keeps its
// identity (use a bearer token: client certificates end at the proxy).
// Reads, watches and the other long-running requests are streamed through
// untouched.
type FaultProxy struct {
	// URL is where the proxy listens (https://127.0.0.1:port), and CAData
	// the PEM of its self-signed certificate.
	URL    string
	CAData []byte

	o      FaultOptions
	mu     sync.Mutex
	rng    *rand.Rand
	on     bool
	writes int64
	counts map[string]map[string]int64 // kind -> resource -> n
}

// StartFaultProxy starts a proxy to c's API server; it stops with the test.
// It starts switched on.
func StartFaultProxy(t T, c *Cluster, o FaultOptions) *FaultProxy {
	t.Helper()
	if o.Spare == nil {
		o.Spare = []string{"coordination.k8s.io/leases", "/events", "events.k8s.io/events"}
	}
	upstream, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	// TLS to the API server with its CA, and no identity of our own: the
	// client's header is what authenticates.
	transport, err := rest.TransportFor(&rest.Config{Host: c.Config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.Config.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{o: o, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0xfa17)), on: true,
		counts: map[string]map[string]int64{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Host = upstream.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watches stream
		// A client that went away (a killed component, a closed watch)
		// is no news: answer 502 without a log line.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusBadGateway)
		},
		ModifyResponse: func(resp *http.Response) error {
			kind, _ := resp.Request.Context().Value(faultKey{}).(string)
			if kind != FaultErrorAfter || resp.StatusCode >= 300 {
				return nil
			}
			// The API server has written the object; the client hears of a
			// failure.
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			gr, name, _ := resourceOf(resp.Request.URL.Path)
			body := statusBody(apierrors.NewInternalError(fmt.Errorf("fault injected after the write of %s %q", gr, name)))
			resp.StatusCode, resp.Status = http.StatusInternalServerError, "500 Internal Server Error"
			resp.Header = http.Header{"Content-Type": {"application/json"}}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			resp.ContentLength = int64(len(body))
			p.count(FaultErrorAfter, gr)
			return nil
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, gr, name := p.decide(r)
		switch kind {
		case FaultError:
			p.count(kind, gr)
			writeStatus(w, apierrors.NewInternalError(fmt.Errorf("fault injected before the write of %s %q", gr, name)))
			return
		case FaultConflict:
			p.count(kind, gr)
			writeStatus(w, apierrors.NewConflict(gr, name, fmt.Errorf("fault injected: the object has been modified; please apply your changes to the latest version and try again")))
			return
		case FaultErrorAfter:
			r = r.WithContext(context.WithValue(r.Context(), faultKey{}, kind))
		}
		rp.ServeHTTP(w, r)
	})}
	// TLS, as clientcmd sends credentials only to an https server: a
	// self-signed certificate for the loopback address.
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	p.CAData = certPEM
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close() })
	p.URL = "https://" + ln.Addr().String()
	return p
}

type faultKey struct{}

// SetOn switches fault injection on or off (requests pass either way).
func (p *FaultProxy) SetOn(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = on
}

// decide picks the fault for a request, "" for none.
func (p *FaultProxy) decide(r *http.Request) (kind string, gr schema.GroupResource, name string) {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return "", gr, ""
	}
	gr, name, ok := resourceOf(r.URL.Path)
	if !ok || slices.Contains(p.o.Spare, gr.Group+"/"+gr.Resource) {
		return "", gr, name
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return "", gr, name
	}
	p.writes++
	if p.rng.Float64() >= p.o.Fraction {
		return "", gr, name
	}
	kinds := []string{FaultError, FaultErrorAfter}
	if r.Method == http.MethodPut || r.Method == http.MethodPatch {
		kinds = append(kinds, FaultConflict)
	}
	return kinds[p.rng.IntN(len(kinds))], gr, name
}

func (p *FaultProxy) count(kind string, gr schema.GroupResource) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.counts[kind] == nil {
		p.counts[kind] = map[string]int64{}
	}
	p.counts[kind][gr.String()]++
}

// FaultCounts are what the proxy did: eligible writes seen while on, and
// faults by kind and resource.
type FaultCounts struct {
	Writes int64
	Faults map[string]map[string]int64
}

// Counts returns a copy of the figures so far.
func (p *FaultProxy) Counts() FaultCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := FaultCounts{Writes: p.writes, Faults: map[string]map[string]int64{}}
	for k, m := range p.counts {
		out.Faults[k] = map[string]int64{}
		for r, n := range m {
			out.Faults[k][r] = n
		}
	}
	return out
}

// Total is the number of faults of a kind ("" for all).
func (f FaultCounts) Total(kind string) int64 {
	var n int64
	for k, m := range f.Faults {
		if kind != "" && k != kind {
			continue
		}
		for _, v := range m {
			n += v
		}
	}
	return n
}

// String is one line: totals by kind, then by resource.
func (f FaultCounts) String() string {
	byRes := map[string]int64{}
	for _, m := range f.Faults {
		for r, n := range m {
			byRes[r] += n
		}
	}
	res := make([]string, 0, len(byRes))
	for r := range byRes {
		res = append(res, r)
	}
	sort.Strings(res)
	parts := make([]string, 0, len(res))
	for _, r := range res {
		parts = append(parts, fmt.Sprintf("%s %d", r, byRes[r]))
	}
	return fmt.Sprintf("%d faults in %d eligible writes (%s %d, %s %d, %s %d; by resource: %s)", f.Total(""), f.Writes,
		FaultError, f.Total(FaultError), FaultConflict, f.Total(FaultConflict), FaultErrorAfter, f.Total(FaultErrorAfter),
		strings.Join(parts, ", "))
}

// Kubeconfig writes a kubeconfig that reaches the API server through the
// proxy with the bearer token of cfg, and returns its path.
func (p *FaultProxy) Kubeconfig(t T, c *Cluster, name string, cfg *rest.Config) string {
	t.Helper()
	if cfg.BearerToken == "" {
		t.Fatal("the fault proxy needs a bearer token (client certificates end at the proxy)")
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["faults"] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: p.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: "faults", AuthInfo: name}
	kc.CurrentContext = name
	path := filepath.Join(c.Dir, name+"-faults.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// resourceOf parses an API path (/api/v1/namespaces/ns/pods/name/status,
// /apis/group/version/resource/name…) into its group, resource and name.
// A POST names its collection, so its name is "".
func resourceOf(path string) (schema.GroupResource, string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var gr schema.GroupResource
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gr.Group = parts[1]
		parts = parts[3:]
	default:
		return gr, "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return gr, "", false
	}
	gr.Resource = parts[0]
	name := ""
	if len(parts) >= 2 {
		name = parts[1]
	}
	if len(parts) >= 3 {
		gr.Resource += "/" + parts[2]
	}
	return gr, name, true
}

func statusBody(err *apierrors.StatusError) []byte {
	s := err.ErrStatus
	s.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	b, _ := json.Marshal(s)
	return b
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	body := statusBody(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(err.ErrStatus.Code))
	_, _ = w.Write(body)
}
