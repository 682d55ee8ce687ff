package server

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// SecureOptions say whether, and with which certificate, the HTTP endpoint
// serves HTTPS with its metrics and profiles behind the API server's
// TokenReview and SubjectAccessReview (--metrics-secure).
type SecureOptions struct {
	// Enabled serves HTTPS and guards the metrics and profiles.
	Enabled bool
	// CertFile and KeyFile are a PEM certificate (chain) and its key
	// (--tls-cert-file, --tls-private-key-file): both or neither. Neither
	// is a self-signed certificate made in memory at start.
	CertFile string
	KeyFile  string
}

// AddFlags registers --metrics-secure, --tls-cert-file and
// --tls-private-key-file.
func (o *SecureOptions) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.Enabled, "metrics-secure", o.Enabled, "Serve --http-endpoint over HTTPS, where the metrics and profiles answer only a bearer token the API server's TokenReview accepts for a user its SubjectAccessReview allows to get the path (/healthz stays open). Needs create on tokenreviews and subjectaccessreviews.")
	fs.StringVar(&o.CertFile, "tls-cert-file", o.CertFile, "PEM certificate served with --metrics-secure. Empty (with --tls-private-key-file empty) is a self-signed certificate made at start.")
	fs.StringVar(&o.KeyFile, "tls-private-key-file", o.KeyFile, "PEM private key of --tls-cert-file.")
}

// Validate checks the settings against the endpoint's address, without
// reading the files: a certificate without its key (or the reverse), a file
// without --metrics-secure, or --metrics-secure without an address, is an
// error.
func (o SecureOptions) Validate(addr string) error {
	switch {
	case (o.CertFile == "") != (o.KeyFile == ""):
		return errors.New("--tls-cert-file and --tls-private-key-file go together: set both or neither")
	case !o.Enabled && o.CertFile != "":
		return errors.New("--tls-cert-file and --tls-private-key-file need --metrics-secure")
	case o.Enabled && addr == "":
		return errors.New("--metrics-secure needs an address to serve on (--http-endpoint)")
	}
	return nil
}

// tlsConfig is the server's TLS configuration: the files' certificate, or a
// self-signed one for host (the endpoint's host, or the hostname).
func (o SecureOptions) tlsConfig(host string) (*tls.Config, error) {
	var certPEM, keyPEM []byte
	var err error
	if o.CertFile != "" {
		if certPEM, err = os.ReadFile(o.CertFile); err != nil {
			return nil, fmt.Errorf("--tls-cert-file: %w", err)
		}
		if keyPEM, err = os.ReadFile(o.KeyFile); err != nil {
			return nil, fmt.Errorf("--tls-private-key-file: %w", err)
		}
	} else if certPEM, keyPEM, err = selfSigned(host); err != nil {
		return nil, fmt.Errorf("self-signed certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file and --tls-private-key-file: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// selfSigned makes a certificate and key for host, with localhost and the
// loopback addresses, signed by a CA made for it alone.
func selfSigned(host string) (certPEM, keyPEM []byte, err error) {
	if host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		if host, err = os.Hostname(); err != nil {
			host = "localhost"
		}
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = append(ips, ip)
	}
	return certutil.GenerateSelfSignedCertKey(host, ips, nil)
}

// listenTLS listens on addr for TLS connections with o's certificate.
func listenTLS(ctx context.Context, addr string, o SecureOptions) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cfg, err := o.tlsConfig(host)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http-endpoint: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Serving HTTPS", "selfSigned", o.CertFile == "")
	return tls.NewListener(ln, cfg), nil
}

// NewGuard is the secure mode's Guard, asking the API server at cfg
// (Reviews.Guard of NewReviews); nil when the mode is off.
func (o SecureOptions) NewGuard(cfg *rest.Config) (Guard, error) {
	if !o.Enabled {
		return nil, nil
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return NewReviews(client).Guard, nil
}
