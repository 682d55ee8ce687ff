// Command local-driver is tether's example local CSI driver: volumes are
// folders under --root on each node, bounded by --capacity, published by
// bind mounts. See README.md.
package main

import (
	"math"

	"context"
	"errors"
	"flag"
	"fmt"
	"gopkg.in/inf.v0"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/examples/local-driver/driver"
	"github.com/tether-csi/tether/examples/local-driver/unixsock"
	"github.com/tether-csi/tether/internal/version"
)

// settings are the driver's flags.
type settings struct {
	endpoint, second, name, nodeID, root, capacity, defaultSize string
	slowCreate                                                  time.Duration
	showVersion                                                 bool
}

// newFlagSet registers every flag of the driver (klog's too) on s, with
// the defaults the environment (getenv) and the host name give.
func newFlagSet(s *settings, getenv func(string) string, hostname string) *flag.FlagSet {
	flags := flag.NewFlagSet("local-driver", flag.ExitOnError)
	flags.Usage = func() {
		fmt.Fprintf(flags.Output(), "Usage: local-driver [flags]\n\nServes a local CSI driver (identity, controller and node) on a unix socket.\n\nFlags:\n")
		flags.PrintDefaults()
	}
	klog.InitFlags(flags)
	flags.StringVar(&s.endpoint, "endpoint", getenv("CSI_ENDPOINT"), "The unix socket to serve on: a path or a unix:// URL. Defaults to $CSI_ENDPOINT.")
	flags.StringVar(&s.second, "controller-endpoint", "", "A second socket serving the same services, for a sidecar in a shared emptyDir while kubelet uses --endpoint. Empty serves none.")
	flags.StringVar(&s.name, "driver-name", driver.DefaultName, "The CSI driver name.")
	flags.StringVar(&s.nodeID, "node-id", firstOf(getenv("NODE_NAME"), hostname), "This node's ID, also the value of its topology segment. Defaults to $NODE_NAME, else the host name.")
	flags.StringVar(&s.root, "root", "/var/lib/tether-local", "The folder that holds the volumes.")
	flags.StringVar(&s.capacity, "capacity", "10Gi", "The capacity of all the volumes together, as a Kubernetes quantity.")
	flags.StringVar(&s.defaultSize, "default-volume-size", "1Gi", "The capacity of a volume whose request names no size.")
	flags.DurationVar(&s.slowCreate, "slow-create", 0, "Answer each CreateVolume this long after making the volume (a slow backend, for chaos tests).")
	flags.BoolVar(&s.showVersion, "version", false, "Print the version and exit.")
	return flags
}

func main() {
	var s settings
	hostname, _ := os.Hostname()
	flags := newFlagSet(&s, os.Getenv, hostname)
	_ = flags.Parse(os.Args[1:])
	if s.showVersion {
		fmt.Println("local-driver", version.String()) // not os.Args[0]: images and tests name the file otherwise
		os.Exit(0)
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "local-driver: unexpected arguments %q: it takes flags only\n", flags.Args())
		os.Exit(2)
	}

	if err := run([]string{s.endpoint, s.second}, s.name, s.nodeID, s.root, s.capacity, s.defaultSize, s.slowCreate); err != nil {
		klog.ErrorS(err, "local-driver failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(endpoints []string, name, nodeID, root, capacity, defaultSize string, slowCreate time.Duration) error {
	var paths []string
	for i, e := range endpoints {
		if i > 0 && e == "" {
			continue
		}
		path, err := socketPath(e)
		if err != nil {
			return err
		}
		paths = append(paths, path)
	}
	total, err := quantity("--capacity", capacity)
	if err != nil {
		return err
	}
	defSize, err := quantity("--default-volume-size", defaultSize)
	if err != nil {
		return err
	}
	if errs := validation.IsValidLabelValue(nodeID); nodeID == "" || len(errs) > 0 {
		return fmt.Errorf("--node-id %q must be a non-empty label value (it is the topology segment's value): %s", nodeID, strings.Join(errs, "; "))
	}
	if errs := validation.IsQualifiedName(driver.TopologyKey(name)); len(errs) > 0 {
		return fmt.Errorf("--driver-name %q does not make a valid topology key: %s", name, strings.Join(errs, "; "))
	}
	d, err := driver.New(driver.Config{
		Name:              name,
		VendorVersion:     version.String(),
		NodeID:            nodeID,
		Root:              root,
		Capacity:          total,
		DefaultVolumeSize: defSize,
		SlowCreate:        slowCreate,
	})
	if err != nil {
		return err
	}

	var listeners []*unixsock.Socket
	for _, path := range paths {
		// A socket left by a previous run is replaced; on the way out each
		// is removed only if no newer driver replaced it (unixsock).
		lis, err := unixsock.Listen(path)
		if err != nil {
			return err
		}
		defer lis.Remove()
		listeners = append(listeners, lis)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(driver.LogCalls))
	d.Register(srv)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		klog.InfoS("Stopping")
		t := time.AfterFunc(10*time.Second, srv.Stop)
		srv.GracefulStop()
		t.Stop()
	}()
	klog.InfoS("Serving", "endpoints", paths, "driver", name, "node", nodeID, "root", root, "capacity", total)
	errs := make(chan error, len(listeners))
	for _, lis := range listeners {
		go func() { errs <- srv.Serve(lis) }()
	}
	err = <-errs
	srv.Stop()
	return err
}

// socketPath accepts "unix:///path", "unix:/path" or a plain path.
func socketPath(endpoint string) (string, error) {
	if endpoint == "" {
		return "", errors.New("no --endpoint and no $CSI_ENDPOINT")
	}
	if rest, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		endpoint = rest
	} else if rest, ok := strings.CutPrefix(endpoint, "unix:"); ok {
		endpoint = rest
	} else if strings.Contains(endpoint, "://") {
		return "", fmt.Errorf("endpoint %q: only unix sockets are served", endpoint)
	}
	if endpoint == "" {
		return "", errors.New("empty socket path")
	}
	return endpoint, nil
}

func quantity(flagName, s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", flagName, err)
	}
	if q.Sign() < 0 {
		return 0, fmt.Errorf("%s: negative quantity %s", flagName, s)
	}
	// AsInt64 refuses some representable values (100Ti), so check the
	// exact decimal: a whole number below the largest int64 (parsing clamps
	// larger values to it).
	d := q.AsDec()
	if d.Cmp(inf.NewDec(math.MaxInt64, 0)) >= 0 || d.Cmp(new(inf.Dec).Round(d, 0, inf.RoundDown)) != 0 {
		return 0, fmt.Errorf("%s: %s is not a whole number of bytes that fits in 64 bits", flagName, s)
	}
	return q.Value(), nil
}

// version is the module version the binary was built from, if any.

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
