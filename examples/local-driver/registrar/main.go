// Command registrar registers a CSI driver with kubelet, as the upstream
// node-driver-registrar does and with its flags: it asks the driver its
// name, then serves kubelet's plugin-registration API
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1) on
// <plugin-registration-path>/<driver>-reg.sock. kubelet finds the socket,
// calls GetInfo, and reaches the driver at --kubelet-registration-path.
//
// With --http-endpoint it serves /healthz, as upstream's does: healthy while
// its registration socket is in place. kubelet's liveness probe then
// restarts a registrar whose socket went (removed by hand, or by an older
// registrar of the same path on its way out), and the new one registers
// again.
//
// deploy/csi uses the upstream image; this command stands in for it where
// that image cannot be fetched (the real-node tests of test/cluster).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/tether-csi/tether/examples/local-driver/unixsock"
)

// options are the registrar's flags.
type options struct {
	csiAddress   string // the driver's socket, in this container
	kubeletPath  string // the driver's socket on the node, as kubelet sees it
	regPath      string // kubelet's plugins_registry, in this container
	httpEndpoint string // where /healthz is served; "" for nowhere
	timeout      time.Duration
}

func main() {
	var o options
	fs := flag.NewFlagSet("registrar", flag.ExitOnError)
	klog.InitFlags(fs)
	fs.StringVar(&o.csiAddress, "csi-address", "/run/csi/socket", "Path of the CSI driver's socket in this container.")
	fs.StringVar(&o.kubeletPath, "kubelet-registration-path", "", "Path of the CSI driver's socket on the node, as kubelet sees it.")
	fs.StringVar(&o.regPath, "plugin-registration-path", "/registration", "Folder of kubelet's plugins_registry, in this container.")
	fs.StringVar(&o.httpEndpoint, "http-endpoint", "", "Address of /healthz (healthy while the registration socket is in place), e.g. :9809; empty for none.")
	fs.DurationVar(&o.timeout, "timeout", time.Second, "Timeout of each CSI call.")
	_ = fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := klog.FromContext(ctx).WithValues("csiAddress", o.csiAddress)
	ctx = klog.NewContext(ctx, logger)
	if err := run(ctx, o); err != nil {
		logger.Error(err, "Registrar failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, o options) error {
	if o.kubeletPath == "" {
		return errors.New("--kubelet-registration-path is required")
	}
	name, err := driverName(ctx, o.csiAddress, o.timeout)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("driver", name)
	sock, err := listen(filepath.Join(o.regPath, name+"-reg.sock"))
	if err != nil {
		return err
	}
	defer sock.Remove()
	if o.httpEndpoint != "" {
		hs := &http.Server{Addr: o.httpEndpoint, Handler: sock.healthz(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "Serving /healthz")
			}
		}()
		defer hs.Close()
	}
	failed := make(chan error, 1)
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, &registration{name: name, endpoint: o.kubeletPath, failed: failed})
	var refused error // kubelet's refusal ends the registrar, as upstream's
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			srv.Stop()
		case refused = <-failed:
			logger.Error(refused, "kubelet refused the registration")
			srv.GracefulStop() // kubelet gets its answer first
		}
	}()
	logger.Info("Serving kubelet's plugin registration", "socket", sock.Path, "endpoint", o.kubeletPath)
	err = srv.Serve(sock)
	<-stopped
	if refused != nil {
		return refused
	}
	return err
}

// regSocket is the registration socket this registrar made. On the way
// out it is removed only if it is still this registrar's: the old
// registrar of a replaced pod must not take the new one's registration
// with it (kubelet would deregister the driver, and the node would lose
// its CSINode entry and its capacity until the new registrar restarted).
type regSocket struct{ *unixsock.Socket }

func listen(path string) (*regSocket, error) {
	s, err := unixsock.Listen(path)
	if err != nil {
		return nil, err
	}
	return &regSocket{s}, nil
}

// healthz answers 200 while the socket is this registrar's, 500 once it is
// gone or replaced: kubelet then restarts the container, which registers
// again.
func (s *regSocket) healthz() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.Ours() {
			http.Error(w, "the registration socket "+s.Path+" is gone or another registrar's", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// driverName asks the driver its name, until it answers or ctx ends.
func driverName(ctx context.Context, address string, timeout time.Duration) (string, error) {
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := csi.NewIdentityClient(conn).GetPluginInfo(cctx, &csi.GetPluginInfoRequest{})
		cancel()
		if err == nil && resp.GetName() != "" {
			return resp.GetName(), nil
		}
		klog.FromContext(ctx).V(2).Info("Waiting for the CSI driver", "err", err)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the CSI driver at %s did not answer: %w", address, err)
		case <-time.After(time.Second):
		}
	}
}

// registration is kubelet's side of the handshake.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
	failed         chan<- error
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.name, Endpoint: r.endpoint,
		SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registration) NotifyRegistrationStatus(ctx context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		select {
		case r.failed <- errors.New(s.Error):
		default:
		}
	} else {
		klog.FromContext(ctx).Info("Registered with kubelet", "driver", r.name)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
