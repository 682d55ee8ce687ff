package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-csi/tether/pkg/binder"
	"github.com/tether-csi/tether/pkg/explain"
)

// pageSize is the Limit of every list: a list of thousands of volumes is
// read a page at a time.
const pageSize = 500

// reader reads, and only reads, what an explanation needs: gets by name,
// lists with field selectors where the API has them, and every list a page
// at a time.
type reader struct {
	client kubernetes.Interface
	// binderLease is tether's binder Lease: a name in any namespace, or
	// namespace/name.
	binderLease string
	// gaps are what could not be read.
	gaps []explain.Gap
}

func (r *reader) gap(resource, scope string, err error) {
	g := explain.Gap{Resource: resource, Error: why(err, scope)}
	if !slices.Contains(r.gaps, g) {
		r.gaps = append(r.gaps, g)
	}
}

// read gathers the claim and what its explanation needs (explain.Plan).
// Only the claim itself is required; anything else that cannot be read
// (RBAC of a namespace user) is recorded as a gap.
func read(ctx context.Context, r *reader, namespace, name string) (explain.Input, error) {
	claim, err := r.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return explain.Input{}, fmt.Errorf("read claim %s/%s: %w", namespace, name, err)
	}
	in := explain.Input{Claim: claim, Now: time.Now()}
	plan := explain.Plan(claim)
	in.Classes = r.classes(ctx)
	switch {
	case plan.AllVolumes:
		in.Volumes = r.volumes(ctx)
	case plan.NamedVolume != "":
		in.Volumes = r.volume(ctx, plan.NamedVolume)
	}
	if plan.SelectedNode != "" {
		in.SelectedNode = r.node(ctx, plan.SelectedNode)
	}
	if plan.Pods {
		in.Pods = r.pods(ctx, namespace)
	}
	if plan.Events {
		in.Events = r.claimEvents(ctx, claim)
		in.Events = append(in.Events, r.podEvents(ctx, claim, in.Pods)...)
	}
	if plan.Provisioning {
		in.CSINodes = r.csiNodes(ctx)
		in.Capacities = r.capacities(ctx, []string{namespace})
		in.Leases = r.leases(ctx, explain.LeaseNames(claim, in.Classes, !r.unreadable("storageclasses"), in.CSINodes))
	}
	b := r.binders(ctx)
	in.Binders = &b
	in.AnotherBinder = r.anotherBinder(ctx, claim)
	in.Unreadable = r.gaps
	return in, nil
}

func (r *reader) unreadable(resource string) bool {
	return slices.ContainsFunc(r.gaps, func(g explain.Gap) bool { return g.Resource == resource })
}

// pages lists a page at a time. A continue token that expired starts the
// list over once.
func pages[T any](ctx context.Context, opts metav1.ListOptions, list func(context.Context, metav1.ListOptions) ([]T, string, error)) ([]*T, error) {
	opts.Limit = pageSize
	var out []*T
	restarted := false
	for {
		items, cont, err := list(ctx, opts)
		if apierrors.IsResourceExpired(err) && opts.Continue != "" && !restarted {
			out, opts.Continue, restarted = nil, "", true
			continue
		}
		if err != nil {
			return nil, err
		}
		for i := range items {
			out = append(out, &items[i])
		}
		if cont == "" {
			return out, nil
		}
		opts.Continue = cont
	}
}

func (r *reader) classes(ctx context.Context) []*storagev1.StorageClass {
	l, err := pages(ctx, metav1.ListOptions{}, func(ctx context.Context, o metav1.ListOptions) ([]storagev1.StorageClass, string, error) {
		l, err := r.client.StorageV1().StorageClasses().List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	if err != nil {
		r.gap("storageclasses", "list, cluster", err)
	}
	return l
}

func (r *reader) volumes(ctx context.Context) []*v1.PersistentVolume {
	l, err := pages(ctx, metav1.ListOptions{}, func(ctx context.Context, o metav1.ListOptions) ([]v1.PersistentVolume, string, error) {
		l, err := r.client.CoreV1().PersistentVolumes().List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	if err != nil {
		r.gap("persistentvolumes", "list, cluster", err)
		return nil
	}
	return l
}

// volume reads one PV: none when it does not exist.
func (r *reader) volume(ctx context.Context, name string) []*v1.PersistentVolume {
	pv, err := r.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return []*v1.PersistentVolume{pv}
	case apierrors.IsNotFound(err):
		return []*v1.PersistentVolume{}
	}
	r.gap("persistentvolumes", "get "+name, err)
	return nil
}

func (r *reader) node(ctx context.Context, name string) *v1.Node {
	n, err := r.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		r.gap("nodes", "get "+name, err)
	}
	if err != nil {
		return nil
	}
	return n
}

func (r *reader) pods(ctx context.Context, namespace string) []*v1.Pod {
	l, err := pages(ctx, metav1.ListOptions{}, func(ctx context.Context, o metav1.ListOptions) ([]v1.Pod, string, error) {
		l, err := r.client.CoreV1().Pods(namespace).List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	if err != nil {
		r.gap("pods", "list, namespace "+namespace, err)
	}
	return l
}

// events lists the events of namespace ("" for all) that the field
// selector picks.
func (r *reader) events(ctx context.Context, namespace string, selector fields.Set) ([]*v1.Event, error) {
	return pages(ctx, metav1.ListOptions{FieldSelector: selector.String()}, func(ctx context.Context, o metav1.ListOptions) ([]v1.Event, string, error) {
		l, err := r.client.CoreV1().Events(namespace).List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
}

// claimEvents are the events about the claim (by name and UID).
func (r *reader) claimEvents(ctx context.Context, c *v1.PersistentVolumeClaim) []*v1.Event {
	l, err := r.events(ctx, c.Namespace, fields.Set{"involvedObject.kind": "PersistentVolumeClaim",
		"involvedObject.name": c.Name, "involvedObject.uid": string(c.UID)})
	if err != nil {
		r.gap("events", "list, namespace "+c.Namespace, err)
	}
	return l
}

// podEventsRead is how many unscheduled pods' FailedScheduling events are
// read.
const podEventsRead = 3

// podEvents are the FailedScheduling events of the claim's unscheduled pods
// whose PodScheduled condition says nothing.
func (r *reader) podEvents(ctx context.Context, c *v1.PersistentVolumeClaim, pods []*v1.Pod) []*v1.Event {
	var out []*v1.Event
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" || !explain.UsesClaim(p, c.Name) || schedulerSaid(p) || n == podEventsRead {
			continue
		}
		n++
		l, err := r.events(ctx, c.Namespace, fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": p.Name,
			"involvedObject.uid": string(p.UID), "reason": "FailedScheduling"})
		if err != nil {
			r.gap("events", "list, namespace "+c.Namespace, err)
			return out
		}
		out = append(out, l...)
	}
	return out
}

func schedulerSaid(p *v1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c v1.PodCondition) bool {
		return c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Message != ""
	})
}

func (r *reader) csiNodes(ctx context.Context) []*storagev1.CSINode {
	l, err := pages(ctx, metav1.ListOptions{}, func(ctx context.Context, o metav1.ListOptions) ([]storagev1.CSINode, string, error) {
		l, err := r.client.StorageV1().CSINodes().List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	if err != nil {
		r.gap("csinodes", "list, cluster", err)
	}
	return l
}

// capacities lists CSIStorageCapacity objects of every namespace, or of
// the given ones when that is all the user may read.
func (r *reader) capacities(ctx context.Context, namespaces []string) []*storagev1.CSIStorageCapacity {
	list := func(ns string) ([]*storagev1.CSIStorageCapacity, error) {
		return pages(ctx, metav1.ListOptions{}, func(ctx context.Context, o metav1.ListOptions) ([]storagev1.CSIStorageCapacity, string, error) {
			l, err := r.client.StorageV1().CSIStorageCapacities(ns).List(ctx, o)
			if err != nil {
				return nil, "", err
			}
			return l.Items, l.Continue, nil
		})
	}
	l, err := list(metav1.NamespaceAll)
	if err == nil {
		return l
	}
	var some []*storagev1.CSIStorageCapacity
	for _, ns := range namespaces {
		if l, err2 := list(ns); err2 == nil {
			some = append(some, l...)
		}
	}
	if len(some) > 0 {
		return some
	}
	r.gap("csistoragecapacities", "list, all namespaces and "+strings.Join(namespaces, ", "), err)
	return nil
}

// leasesNamed lists the Leases of that name in every namespace.
func (r *reader) leasesNamed(ctx context.Context, name string) ([]*coordinationv1.Lease, error) {
	return pages(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()},
		func(ctx context.Context, o metav1.ListOptions) ([]coordinationv1.Lease, string, error) {
			l, err := r.client.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, o)
			if err != nil {
				return nil, "", err
			}
			return l.Items, l.Continue, nil
		})
}

// leases reads the provisioners' Leases by name (explain.LeaseNames).
func (r *reader) leases(ctx context.Context, names []string) []*coordinationv1.Lease {
	var out []*coordinationv1.Lease
	for _, name := range names {
		l, err := r.leasesNamed(ctx, name)
		if err != nil {
			r.gap("leases", "list, all namespaces, by name", err)
			return out
		}
		out = append(out, l...)
	}
	return out
}

// binders reads tether's binder Lease and kube-controller-manager's.
func (r *reader) binders(ctx context.Context) explain.BinderLeases {
	b := explain.BinderLeases{Name: r.binderLease, TetherRead: true, KCMRead: true}
	if ns, name, ok := strings.Cut(r.binderLease, "/"); ok {
		l, err := r.client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			b.Tether = []*coordinationv1.Lease{l}
		case !apierrors.IsNotFound(err):
			b.TetherRead = false
			r.gap("binder leases", "get "+r.binderLease, err)
		}
	} else {
		l, err := r.leasesNamed(ctx, r.binderLease)
		if err != nil {
			b.TetherRead = false
			r.gap("binder leases", "list, all namespaces, name "+r.binderLease, err)
		}
		b.Tether = l
	}
	l, err := r.client.CoordinationV1().Leases(explain.KCMLeaseNS).Get(ctx, explain.KCMLeaseName, metav1.GetOptions{})
	switch {
	case err == nil:
		b.KCM = l
	case !apierrors.IsNotFound(err):
		b.KCMRead = false
		r.gap("binder leases", "get "+explain.KCMLeaseNS+"/"+explain.KCMLeaseName, err)
	}
	return b
}

// why shortens an API error for the "could not read" list.
func why(err error, scope string) string {
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden (" + scope + ")"
	case apierrors.IsUnauthorized(err):
		return "unauthorized"
	}
	return err.Error()
}

// anotherBinder reads the AnotherBinder events of the claim and of the
// volume it names (a PV's events are in the default namespace; those that
// cannot be read are passed over).
func (r *reader) anotherBinder(ctx context.Context, c *v1.PersistentVolumeClaim) []*v1.Event {
	out, err := r.events(ctx, c.Namespace, fields.Set{"involvedObject.kind": "PersistentVolumeClaim",
		"involvedObject.uid": string(c.UID), "reason": binder.ReasonAnotherBinder})
	if err != nil {
		r.gap("events", "list, namespace "+c.Namespace, err)
		return nil
	}
	if name := c.Spec.VolumeName; name != "" {
		l, err := r.events(ctx, metav1.NamespaceDefault, fields.Set{"involvedObject.kind": "PersistentVolume",
			"involvedObject.name": name, "reason": binder.ReasonAnotherBinder})
		// Best effort: a namespace user may not read the default
		// namespace, and the claim's own events say it too.
		if err == nil {
			out = append(out, l...)
		}
	}
	return out
}
