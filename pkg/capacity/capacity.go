package capacity

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// The labels on every published object, as external-provisioner sets them.
const (
	LabelDriverName = "csi.storage.k8s.io/drivername"
	LabelManagedBy  = "csi.storage.k8s.io/managed-by"
)

// Driver is what the publisher asks.
type Driver interface {
	DriverName() string
	GetCapacity(context.Context, *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error)
}

// Options configure a Publisher.
type Options struct {
	Client kubernetes.Interface
	Driver Driver
	// Namespace holds the objects; Owner, if set, owns them (so they go
	// when the provisioner's Deployment or DaemonSet goes).
	Namespace string
	Owner     *metav1.OwnerReference
	// ManagedBy tells this publisher's objects from others' (one per node
	// in node-deployment mode).
	ManagedBy string
	// Segments lists the topology segments to publish for.
	Segments func() ([]map[string]string, error)
	Classes  storagelisters.StorageClassLister
	// DriverParams turns class parameters into the driver's parameters.
	DriverParams func(map[string]string) (map[string]string, error)
	// ImmediateBinding also publishes for Immediate classes.
	ImmediateBinding bool
	PollInterval     time.Duration
	// Threads is how many GetCapacity calls a refresh makes at a time
	// (external-provisioner's --capacity-threads); 0 is 1.
	Threads int
}

// Publisher keeps the objects current.
type Publisher struct {
	o       Options
	trigger chan struct{}

	mu      sync.Mutex
	full    bool     // a refresh of everything is asked for
	changes []change // the parts to refresh, when not everything

	published record // this publisher's objects, as it last wrote or listed them
}

// maxChanges is how many parts may wait for a refresh before the next one
// refreshes everything instead.
const maxChanges = 256

// New returns a Publisher; Run starts it.
func New(o Options) (*Publisher, error) {
	if o.Client == nil || o.Driver == nil || o.Segments == nil || o.Classes == nil || o.DriverParams == nil {
		return nil, errors.New("capacity: client, driver, segments, classes and parameter parsing are required")
	}
	if o.Namespace == "" {
		return nil, errors.New("capacity: the namespace for CSIStorageCapacity objects is empty (set NAMESPACE)")
	}
	if o.PollInterval <= 0 {
		return nil, errors.New("capacity: the poll interval must be positive")
	}
	return &Publisher{o: o, trigger: make(chan struct{}, 1)}, nil
}

func (p *Publisher) threads() int { return max(p.o.Threads, 1) }

// Trigger asks for a refresh of everything soon. It never blocks.
func (p *Publisher) Trigger() {
	p.mu.Lock()
	p.full, p.changes = true, nil
	p.mu.Unlock()
	p.wake()
}

// VolumeChanged asks for a refresh soon of what creating or deleting a
// volume changed: its class, in the segments its node affinity admits
// (every segment when it has none). It never blocks.
func (p *Publisher) VolumeChanged(pv *v1.PersistentVolume) {
	p.add(change{class: pv.Spec.StorageClassName, topology: volumeTopology(pv)})
}

// ClassChanged asks for a refresh soon of one class (added, changed or
// deleted) in every segment. It never blocks.
func (p *Publisher) ClassChanged(name string) { p.add(change{class: name}) }

// ClassHandler refreshes a class when it is added, changed or deleted.
// The classes of the informer's first list are left to Run's first
// refresh.
func (p *Publisher) ClassHandler() cache.ResourceEventHandler {
	on := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if sc, ok := obj.(*storagev1.StorageClass); ok {
			p.ClassChanged(sc.Name)
		} else {
			p.Trigger()
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				on(obj)
			}
		},
		UpdateFunc: func(_, obj any) { on(obj) },
		DeleteFunc: on,
	}
}

func (p *Publisher) add(ch change) {
	p.mu.Lock()
	if !p.full {
		if p.changes = append(p.changes, ch); len(p.changes) > maxChanges {
			p.full, p.changes = true, nil
		}
	}
	p.mu.Unlock()
	p.wake()
}

func (p *Publisher) wake() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// take returns what was asked for since the last call, and forgets it.
func (p *Publisher) take() (full bool, changes []change) {
	p.mu.Lock()
	defer p.mu.Unlock()
	full, changes = p.full, p.changes
	p.full, p.changes = false, nil
	return full, changes
}

// Run refreshes everything every PollInterval, and the parts asked for by
// VolumeChanged and ClassChanged (everything after Trigger) as they come,
// until ctx ends. The informers behind Segments and Classes must have
// synced: the first refresh covers what they hold, and the handlers leave
// the objects of their first list to it.
func (p *Publisher) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("capacity")
	ticker := time.NewTicker(p.o.PollInterval)
	defer ticker.Stop()
	p.take() // the first refresh is of everything
	err := p.Sync(ctx)
	for {
		if err != nil && ctx.Err() == nil {
			logger.Error(err, "Publishing storage capacity")
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			p.take()
			err = p.Sync(ctx)
		case <-p.trigger:
			if full, changes := p.take(); full {
				err = p.Sync(ctx)
			} else if len(changes) > 0 {
				logger.V(4).Info("Refreshing part of the storage capacity", "parts", len(changes))
				err = p.syncChanged(ctx, changes...)
			}
		}
	}
}

// change is a part of the published objects to refresh.
type change struct {
	class    string              // "": every class
	topology []map[string]string // nil: every segment
}

// covers reports whether an object for (class, segment) is in the part.
func (ch change) covers(e entry) bool {
	if ch.class != "" && ch.class != e.class {
		return false
	}
	if ch.topology == nil {
		return true
	}
	return slices.ContainsFunc(ch.topology, func(t map[string]string) bool { return agree(t, e.segment) })
}

// agree reports whether two segments have the same value for every key
// they share: a volume in {zone: a} is in the segment {zone: a, rack: 1}.
func agree(a, b map[string]string) bool {
	for k, v := range a {
		if w, ok := b[k]; ok && w != v {
			return false
		}
	}
	return true
}

// volumeTopology turns a volume's required node affinity into the
// segments it admits, one per term: nil (every segment) when it has none,
// or when a term is more than "key In (one value)" for each key.
func volumeTopology(pv *v1.PersistentVolume) []map[string]string {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) == 0 {
		return nil
	}
	var out []map[string]string
	for _, term := range na.Required.NodeSelectorTerms {
		if len(term.MatchFields) > 0 {
			return nil
		}
		seg := map[string]string{}
		for _, r := range term.MatchExpressions {
			if r.Operator != v1.NodeSelectorOpIn || len(r.Values) != 1 {
				return nil
			}
			seg[r.Key] = r.Values[0]
		}
		out = append(out, seg)
	}
	return out
}

type entry struct {
	class   string
	segment map[string]string
}

func (e entry) key() string {
	var b strings.Builder
	b.WriteString(e.class + "|")
	for _, k := range slices.Sorted(maps.Keys(e.segment)) {
		b.WriteString(k + "=" + e.segment[k] + ";")
	}
	return b.String()
}
