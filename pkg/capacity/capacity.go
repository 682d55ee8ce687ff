// Package capacity publishes storage.k8s.io/v1 CSIStorageCapacity objects:
// for every topology segment and every StorageClass of the driver, what
// the driver's GetCapacity says is free there. kube-scheduler reads them
// (with storageCapacity: true on the CSIDriver) and places no pod where its
// volume cannot fit.
package capacity

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
}

// Publisher keeps the objects current.
type Publisher struct {
	o       Options
	trigger chan struct{}

	mu      sync.Mutex
	full    bool     // a refresh of everything is asked for
	changes []change // the parts to refresh, when not everything
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
	return cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, obj any) { on(obj) }, DeleteFunc: on}
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
// until ctx ends.
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

type want struct {
	entry
	capacity, maxSize *resource.Quantity
}

// Sync makes the published objects match the driver's answers once.
func (p *Publisher) Sync(ctx context.Context) error {
	return p.sync(ctx, func(entry) bool { return true })
}

// syncChanged does what Sync does, for the objects in the changed parts
// only: it asks the driver about those (class, segment) pairs alone.
func (p *Publisher) syncChanged(ctx context.Context, changes ...change) error {
	return p.sync(ctx, func(e entry) bool {
		return slices.ContainsFunc(changes, func(ch change) bool { return ch.covers(e) })
	})
}

// sync makes the published objects for which in is true match the
// driver's answers; it leaves the others alone.
func (p *Publisher) sync(ctx context.Context, in func(entry) bool) error {
	desired, err := p.desired(ctx, in)
	if err != nil {
		return err
	}
	api := p.o.Client.StorageV1().CSIStorageCapacities(p.o.Namespace)
	sel := labels.SelectorFromSet(p.labels()).String()
	existing, err := api.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return err
	}
	var errs []error
	for i := range existing.Items {
		obj := &existing.Items[i]
		e := entry{class: obj.StorageClassName, segment: matchLabels(obj)}
		if !in(e) {
			continue
		}
		k := e.key()
		w, ok := desired[k]
		switch {
		case !ok:
			if err := api.Delete(ctx, obj.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		case !sameQuantity(obj.Capacity, w.capacity) || !sameQuantity(obj.MaximumVolumeSize, w.maxSize):
			obj.Capacity, obj.MaximumVolumeSize = w.capacity, w.maxSize
			if _, err := api.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
				errs = append(errs, err)
			}
		}
		delete(desired, k)
	}
	for _, w := range desired {
		obj := &storagev1.CSIStorageCapacity{
			ObjectMeta:       metav1.ObjectMeta{GenerateName: "csisc-", Labels: p.labels()},
			NodeTopology:     &metav1.LabelSelector{MatchLabels: maps.Clone(w.segment)},
			StorageClassName: w.class, Capacity: w.capacity, MaximumVolumeSize: w.maxSize,
		}
		if p.o.Owner != nil {
			obj.OwnerReferences = []metav1.OwnerReference{*p.o.Owner}
		}
		if _, err := api.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *Publisher) labels() map[string]string {
	return map[string]string{LabelDriverName: p.o.Driver.DriverName(), LabelManagedBy: p.o.ManagedBy}
}

func matchLabels(obj *storagev1.CSIStorageCapacity) map[string]string {
	if obj.NodeTopology == nil {
		return nil
	}
	return obj.NodeTopology.MatchLabels
}

func sameQuantity(a, b *resource.Quantity) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Cmp(*b) == 0
}

// desired asks the driver for every (class, segment) for which in is true.
func (p *Publisher) desired(ctx context.Context, in func(entry) bool) (map[string]want, error) {
	segments, err := p.o.Segments()
	if err != nil {
		return nil, fmt.Errorf("topology segments: %w", err)
	}
	classes, err := p.o.Classes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := map[string]want{}
	for _, class := range classes {
		if class.Provisioner != p.o.Driver.DriverName() {
			continue
		}
		delayed := class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
		if !delayed && !p.o.ImmediateBinding {
			continue
		}
		params, err := p.o.DriverParams(class.Parameters)
		if err != nil {
			continue // the provisioner reports a bad class when it is used
		}
		for _, seg := range segments {
			if !in(entry{class: class.Name, segment: seg}) {
				continue
			}
			resp, err := p.o.Driver.GetCapacity(ctx, &csi.GetCapacityRequest{
				Parameters: params, AccessibleTopology: &csi.Topology{Segments: seg}})
			if err != nil {
				return nil, fmt.Errorf("GetCapacity for class %s in %v: %w", class.Name, seg, err)
			}
			w := want{entry: entry{class: class.Name, segment: seg},
				capacity: resource.NewQuantity(max(resp.AvailableCapacity, 0), resource.BinarySI)}
			if m := resp.GetMaximumVolumeSize(); m != nil {
				w.maxSize = resource.NewQuantity(max(m.Value, 0), resource.BinarySI)
			}
			out[w.key()] = w
		}
	}
	return out, nil
}
