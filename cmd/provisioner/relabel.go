package main

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/tether-csi/tether/pkg/provisioner/scope"
)

// The delays between two listings of the PVs that changes of this node's
// labels ask for (scope.RelistBackoff): a label that flaps costs a listing
// every 5 minutes at most once the delay has grown.
const (
	relistMin = 2 * time.Second
	relistMax = 5 * time.Minute
)

// reasonRelisted is the reason of the Normal event on this node that says
// its provisioner lists its PVs again, and which labels changed.
const reasonRelisted = "NodeLabelsChanged"

// relabel lists this node's PVs again (node-deployment mode) when its
// labels narrow (scope.NarrowedKeys): a PV the Keeper refused under the
// old labels may be this node's under the new ones. It never loses a
// change: each one wakes it, and the listing that serves a change starts
// after the change is in the node lister, which the Keeper reads (see
// scope.ListerWatcher.Relist). Listings are spaced by backoff; the
// changes that come while one waits are served by it together.
type relabel struct {
	clock   clock.Clock
	backoff scope.RelistBackoff
	// relist asks the PV informer for a new listing; notified says that it
	// did, and for which label keys (sorted).
	relist   func()
	notified func(ctx context.Context, keys []string)

	mu   sync.Mutex
	keys map[string]bool
	wake chan struct{}
}

func newRelabel(c clock.Clock, b scope.RelistBackoff, relist func(), notified func(context.Context, []string)) *relabel {
	return &relabel{clock: c, backoff: b, relist: relist, notified: notified, keys: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// changed takes the keys of labels that narrowed: a listing follows.
func (r *relabel) changed(keys []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		r.keys[k] = true
	}
	select {
	case r.wake <- struct{}{}:
	default: // a wake-up is pending: it takes these keys too
	}
}

// take returns the keys changed since the last take, sorted, and reads
// the wake-up pending for them, if any.
func (r *relabel) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.wake:
	default:
	}
	keys := make([]string, 0, len(r.keys))
	for k := range r.keys {
		keys = append(keys, k)
	}
	clear(r.keys)
	slices.Sort(keys)
	return keys
}

// run serves the changes until ctx ends: at each, once the backoff allows,
// one listing for every change until then.
func (r *relabel) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		if d := r.backoff.Wait(r.clock.Now()); d > 0 {
			t := r.clock.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
		// Every change until take is served by this listing; any later
		// one wakes the loop again.
		keys := r.take()
		r.backoff.Started(r.clock.Now())
		r.relist()
		r.notified(ctx, keys)
	}
}

// relistNotice says that a listing was asked for: a log line, the
// counter, and an event on the node (when a recorder is given).
func relistNotice(name string, node func() runtime.Object, recorder record.EventRecorder, relists prometheus.Counter) func(context.Context, []string) {
	return func(ctx context.Context, keys []string) {
		relists.Inc()
		klog.FromContext(ctx).Info("This node's labels changed: listing its PVs again", "node", klog.KRef("", name), "labels", keys)
		if recorder != nil {
			recorder.Eventf(node(), v1.EventTypeNormal, reasonRelisted,
				"Labels %s of this node changed or were removed: its provisioner lists its PVs again (a PV left out under the old labels may be this node's now)",
				strings.Join(keys, ", "))
		}
	}
}

// nodeRef is the object an event on the node is recorded on: the node as
// the lister has it, else a reference by name (kubelet's convention of
// the node's name as UID).
func nodeRef(get func() (*v1.Node, error), name string) func() runtime.Object {
	return func() runtime.Object {
		if n, err := get(); err == nil {
			return n
		}
		return &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: name, UID: types.UID(name)}
	}
}
