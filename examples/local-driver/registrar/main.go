// Command registrar registers a CSI driver with kubelet, as the upstream
// node-driver-registrar does and with its flags: it asks the driver its
// name, then serves kubelet's plugin-registration API
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1) on
// <plugin-registration-path>/<driver>-reg.sock. kubelet finds the socket,
// calls GetInfo, and reaches the driver at --kubelet-registration-path.
//
// deploy/csi uses the upstream image; this command stands in for it where
// that image cannot be fetched (the real-node tests of test/cluster).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
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
)

func main() {
	fs := flag.NewFlagSet("registrar", flag.ExitOnError)
	klog.InitFlags(fs)
	csiAddress := fs.String("csi-address", "/run/csi/socket", "Path of the CSI driver's socket in this container.")
	kubeletPath := fs.String("kubelet-registration-path", "", "Path of the CSI driver's socket on the node, as kubelet sees it.")
	regPath := fs.String("plugin-registration-path", "/registration", "Folder of kubelet's plugins_registry, in this container.")
	timeout := fs.Duration("timeout", time.Second, "Timeout of each CSI call.")
	_ = fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := klog.FromContext(ctx).WithValues("csiAddress", *csiAddress)
	ctx = klog.NewContext(ctx, logger)
	if err := run(ctx, *csiAddress, *kubeletPath, *regPath, *timeout); err != nil {
		logger.Error(err, "Registrar failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, csiAddress, kubeletPath, regPath string, timeout time.Duration) error {
	if kubeletPath == "" {
		return errors.New("--kubelet-registration-path is required")
	}
	name, err := driverName(ctx, csiAddress, timeout)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("driver", name)
	socket := filepath.Join(regPath, name+"-reg.sock")
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	lis, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	defer os.Remove(socket)
	failed := make(chan error, 1)
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, &registration{name: name, endpoint: kubeletPath, failed: failed})
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
	logger.Info("Serving kubelet's plugin registration", "socket", socket, "endpoint", kubeletPath)
	err = srv.Serve(lis)
	<-stopped
	if refused != nil {
		return refused
	}
	return err
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
