package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/tether-csi/tether/pkg/explain"
)

// namedVolumesRead is how many volumes --all-pending gets by name before
// it lists them all instead.
const namedVolumesRead = 20

// pendingReport is the --all-pending answer: every claim that waits, with
// its cause. -o json and -o yaml print it by its json tags.
type pendingReport struct {
	// Scope is "all namespaces" or "namespace NAME".
	Scope         string                `json:"scope"`
	Claims        []explain.Row         `json:"claims"`
	BinderRunning *explain.BinderStatus `json:"binderRunning,omitempty"`
	// Notes say how the scope was narrowed.
	Notes      []string      `json:"notes,omitempty"`
	Unreadable []explain.Gap `json:"unreadable,omitempty"`
}

// readPending lists the claims of namespace ("" for every namespace) and
// explains each that waits, reading what they need once for all. When the
// user may not list claims in every namespace, it falls back to fallback
// (the kubeconfig context's namespace) and says so.
func readPending(ctx context.Context, r *reader, namespace, fallback string) (pendingReport, error) {
	rep := pendingReport{Scope: scope(namespace)}
	claims, err := r.claims(ctx, namespace)
	if err != nil && namespace == "" && apierrors.IsForbidden(err) && fallback != "" {
		rep.Notes = append(rep.Notes, fmt.Sprintf("claims of every namespace could not be read (%s): only namespace %s is shown", why(err, "list, all namespaces"), fallback))
		namespace, rep.Scope = fallback, scope(fallback)
		claims, err = r.claims(ctx, namespace)
	}
	if err != nil {
		return rep, fmt.Errorf("list claims (%s): %w", rep.Scope, err)
	}
	var waiting []*v1.PersistentVolumeClaim
	for _, c := range claims {
		if explain.Waiting(c) {
			waiting = append(waiting, c)
		}
	}
	now := time.Now()
	b := r.binders(ctx)
	rep.BinderRunning = ptr(explain.WhichBinder(b, now))
	if len(waiting) == 0 {
		rep.Unreadable = r.gaps
		return rep, nil
	}
	shared := r.readShared(ctx, namespace, waiting)
	for _, c := range waiting {
		in := shared.input(c)
		in.Now, in.Binders = now, &b
		in.Unreadable = slices.Concat(r.gaps, shared.nsGaps[c.Namespace])
		rep.Claims = append(rep.Claims, explain.RowOf(c, explain.Explain(in)))
	}
	explain.SortRows(rep.Claims)
	rep.Unreadable = r.gaps
	for _, gs := range shared.nsGaps {
		for _, g := range gs {
			if !slices.Contains(rep.Unreadable, g) {
				rep.Unreadable = append(rep.Unreadable, g)
			}
		}
	}
	return rep, nil
}

func scope(namespace string) string {
	if namespace == "" {
		return "all namespaces"
	}
	return "namespace " + namespace
}

func ptr[T any](v T) *T { return &v }

func (r *reader) claims(ctx context.Context, namespace string) ([]*v1.PersistentVolumeClaim, error) {
	return pages(ctx, metav1.ListOptions{}, func(ctx context.Context, o metav1.ListOptions) ([]v1.PersistentVolumeClaim, string, error) {
		l, err := r.client.CoreV1().PersistentVolumeClaims(namespace).List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
}

// shared is what --all-pending reads once for all the waiting claims.
type shared struct {
	explain.Input
	nodes  map[string]*v1.Node
	pods   map[string][]*v1.Pod
	events map[string][]*v1.Event
	// nsGaps are the gaps of one namespace (its pods or events).
	nsGaps map[string][]explain.Gap
}

func (s *shared) input(c *v1.PersistentVolumeClaim) explain.Input {
	in := s.Input
	in.Claim = c
	in.Pods = s.pods[c.Namespace]
	in.Events = s.events[c.Namespace]
	if s.Events != nil { // one list for every namespace
		in.Events = s.Events
	}
	if p := explain.Plan(c); p.SelectedNode != "" {
		in.SelectedNode = s.nodes[p.SelectedNode]
	}
	return in
}

// readShared reads, for the claims together, what their plans need: every
// volume only when one of them is matched against them, the pods and claim
// events of their namespaces, the selected nodes, and the Leases named.
func (r *reader) readShared(ctx context.Context, namespace string, claims []*v1.PersistentVolumeClaim) *shared {
	s := &shared{nodes: map[string]*v1.Node{}, pods: map[string][]*v1.Pod{}, events: map[string][]*v1.Event{},
		nsGaps: map[string][]explain.Gap{}}
	s.Classes = r.classes(ctx)
	var plans []explain.ReadPlan
	var named []string
	all, provisioning := false, false
	var podNS, eventNS []string
	for _, c := range claims {
		p := explain.Plan(c)
		plans = append(plans, p)
		all = all || p.AllVolumes
		provisioning = provisioning || p.Provisioning
		if p.NamedVolume != "" && !slices.Contains(named, p.NamedVolume) {
			named = append(named, p.NamedVolume)
		}
		if p.Pods && !slices.Contains(podNS, c.Namespace) {
			podNS = append(podNS, c.Namespace)
		}
		if p.Events && !slices.Contains(eventNS, c.Namespace) {
			eventNS = append(eventNS, c.Namespace)
		}
	}
	if all || len(named) > namedVolumesRead {
		s.Volumes = r.volumes(ctx)
	} else {
		s.Volumes = []*v1.PersistentVolume{}
		for _, n := range named {
			vs := r.volume(ctx, n)
			if vs == nil {
				s.Volumes = nil
				break
			}
			s.Volumes = append(s.Volumes, vs...)
		}
	}
	for _, ns := range podNS {
		before := len(r.gaps)
		s.pods[ns] = r.pods(ctx, ns)
		s.moveGaps(r, before, ns)
	}
	claimEvents := fields.Set{"involvedObject.kind": "PersistentVolumeClaim"}
	if namespace == "" && len(eventNS) > 1 {
		if l, err := r.events(ctx, "", claimEvents); err == nil {
			s.Events = l
			eventNS = nil
		}
	}
	for _, ns := range eventNS {
		l, err := r.events(ctx, ns, claimEvents)
		if err != nil {
			s.nsGaps[ns] = append(s.nsGaps[ns], explain.Gap{Resource: "events", Error: why(err, "list, namespace "+ns)})
		}
		s.events[ns] = l
	}
	for _, p := range plans {
		if p.SelectedNode != "" {
			if _, ok := s.nodes[p.SelectedNode]; !ok {
				s.nodes[p.SelectedNode] = r.node(ctx, p.SelectedNode)
			}
		}
	}
	if provisioning {
		s.CSINodes = r.csiNodes(ctx)
		s.Capacities = r.capacities(ctx, podNS)
		var names []string
		for _, c := range claims {
			for _, n := range explain.LeaseNames(c, s.Classes, !r.unreadable("storageclasses"), s.CSINodes) {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
		s.Leases = r.leases(ctx, names)
	}
	return s
}

// moveGaps moves the gaps recorded since before to namespace ns: a
// namespace the user may not read leaves the others' answers whole.
func (s *shared) moveGaps(r *reader, before int, ns string) {
	s.nsGaps[ns] = append(s.nsGaps[ns], r.gaps[before:]...)
	r.gaps = r.gaps[:before]
}
