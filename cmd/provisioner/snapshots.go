package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/provisioner/protect"
)

// snapshots is the VolumeSnapshot API as the provisioner uses it: a client
// for restores and, for the snapshot protection, a VolumeSnapshot informer.
// It is there only when the driver has CREATE_DELETE_SNAPSHOT and the
// cluster serves snapshot.storage.k8s.io/v1: tether runs on clusters
// without the snapshot CRDs, where a restore fails with a clear error.
type snapshots struct {
	client     snapclientset.Interface
	factory    snapinformers.SharedInformerFactory
	protection *protect.SnapshotProtection
}

// snapshotDiscoveryBackoff paces the retries of the VolumeSnapshot API's
// discovery at start: 1 s, doubling up to 30 s, until the context ends.
var snapshotDiscoveryBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Cap: 30 * time.Second, Steps: math.MaxInt32}

// newSnapshots returns nil (and no error) when the driver or the cluster
// cannot restore snapshots.
func newSnapshots(ctx context.Context, cfg *rest.Config, disc discovery.DiscoveryInterface, driverHasSnapshots bool) (*snapshots, error) {
	if !driverHasSnapshots {
		return nil, nil
	}
	logger := klog.FromContext(ctx)
	gv := snapv1.SchemeGroupVersion.String()
	// A discovery error other than "not served" (the API server busy or
	// restarting) is retried, with a growing wait, until the process stops.
	var list *metav1.APIResourceList
	err := wait.ExponentialBackoffWithContext(ctx, snapshotDiscoveryBackoff, func(context.Context) (bool, error) {
		var err error
		list, err = disc.ServerResourcesForGroupVersion(gv)
		if err != nil && !apierrors.IsNotFound(err) {
			logger.Info("Looking for the VolumeSnapshot API failed; will retry", "groupVersion", gv, "err", err)
			return false, nil
		}
		if apierrors.IsNotFound(err) {
			list = nil
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("looking for the VolumeSnapshot API (%s): %w", gv, err)
	}
	if list == nil || !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "volumesnapshots" }) {
		logger.Info("The cluster does not serve VolumeSnapshots: claims restored from a snapshot fail until the snapshot CRDs are installed and the provisioner restarted", "groupVersion", gv)
		return nil, nil
	}
	// CRDs speak JSON only (the main client asks for protobuf).
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	client, err := snapclientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &snapshots{client: client, factory: snapinformers.NewSharedInformerFactory(client, 0)}, nil
}

// Client is the snapshot client, nil without the API.
func (s *snapshots) Client() snapclientset.Interface {
	if s == nil {
		return nil
	}
	return s.client
}

// protect wires the snapshot protection to the claim informer, before it
// starts.
func (s *snapshots) protect(client kubernetes.Interface, claims cache.SharedIndexInformer, limiter workqueue.TypedRateLimiter[string]) error {
	if s == nil {
		return nil
	}
	var err error
	s.protection, err = protect.NewSnapshotProtection(protect.SnapshotProtectionOptions{Client: client, SnapshotClient: s.client,
		Claims: claims, Snapshots: s.factory.Snapshot().V1().VolumeSnapshots().Informer(), RateLimiter: limiter})
	return err
}

// run starts the informer and the protection until ctx ends.
func (s *snapshots) run(ctx context.Context, workers int) {
	if s == nil {
		return
	}
	s.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.factory.Snapshot().V1().VolumeSnapshots().Informer().HasSynced) {
		return
	}
	s.protection.Run(ctx, workers)
}
