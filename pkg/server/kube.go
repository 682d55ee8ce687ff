package server

import (
	"flag"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeOptions say how to reach the API server.
type KubeOptions struct {
	Kubeconfig string
	QPS        float64
	Burst      int
}

// AddFlags registers --kubeconfig, --kube-api-qps and --kube-api-burst.
func (o *KubeOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig file. Empty means the in-cluster configuration.")
	fs.Float64Var(&o.QPS, "kube-api-qps", o.QPS, "Queries per second allowed to the API server.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Burst of queries allowed to the API server.")
}

// Validate checks the client's rate limits: both positive.
func (o KubeOptions) Validate() error {
	if o.QPS <= 0 || o.Burst <= 0 {
		return fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, got %v and %d", o.QPS, o.Burst)
	}
	return nil
}

// RestConfig builds the client configuration.
func (o KubeOptions) RestConfig(userAgent string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if o.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	cfg.UserAgent = userAgent
	// Protobuf, as kube-controller-manager uses: far cheaper than JSON to
	// encode and decode, for us and for the API server. Every type we use
	// is built in, so every one supports it.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	// gzip stays on (client-go's default), unlike kube-controller-manager's
	// clients: the API server compresses the large responses, a listing's
	// pages, and twenty provisioners listing at once were served faster
	// with it than without (docs/performance.md, "A driver roll").
	return cfg, nil
}

// DropManagedFields is an informer transform that drops each object's
// managed fields before it is cached. No controller of tether reads them,
// and writes without them keep the server's (the API server takes the live
// object's managed fields when a write carries none); without them every
// cached object is smaller, and so is every copy of it.
func DropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
