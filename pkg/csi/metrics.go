package csi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"
)

// The histogram has external-provisioner's name, labels and buckets, so
// dashboards made for EP work unchanged.
const (
	operationsMetric = "csi_sidecar_operations_seconds"
	labelDriver      = "driver_name"
	labelMethod      = "method_name"
	labelCode        = "grpc_status_code"
)

var operationsBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600}

// operationsHistogram registers the histogram on reg, or returns the one a
// previous Connect registered there.
func operationsHistogram(reg prometheus.Registerer) (*prometheus.HistogramVec, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    operationsMetric,
		Help:    "Duration of CSI calls to the driver, by driver, gRPC method and gRPC status code.",
		Buckets: operationsBuckets,
	}, []string{labelDriver, labelMethod, labelCode})
	err := reg.Register(h)
	if err == nil {
		return h, nil
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(*prometheus.HistogramVec); ok {
			return existing, nil
		}
	}
	return nil, fmt.Errorf("cannot register the %s metric: %w", operationsMetric, err)
}

// intercept times every unary call into the histogram and, at verbosity 5,
// logs the call with its secrets stripped.
func (c *Conn) intercept(ctx context.Context, method string, req, reply any,
	cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	logger := klog.FromContext(ctx).V(5)
	if logger.Enabled() {
		logger.Info("Calling the CSI driver", "method", method, "request", stripAny(req))
	}
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	elapsed := time.Since(start)
	code := status.Code(err)
	if c.ops != nil {
		c.ops.WithLabelValues(*c.metricName.Load(), method, code.String()).Observe(elapsed.Seconds())
	}
	if logger.Enabled() {
		if err != nil {
			logger.Info("CSI call failed", "method", method, "code", code.String(), "duration", elapsed, "err", err)
		} else {
			logger.Info("CSI call done", "method", method, "duration", elapsed, "response", stripAny(reply))
		}
	}
	return err
}

func stripAny(v any) string {
	if m, ok := v.(proto.Message); ok {
		return StripSecrets(m)
	}
	return fmt.Sprintf("<%T>", v)
}
