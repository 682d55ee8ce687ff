package explain

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/binder"
	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/migration"
)

// provisioning describes the dynamic path, nil when the claim has none (no
// class, or a class without a provisioner).
func (w *world) provisioning() *Provisioning {
	name := provisionerOf(w.claim, w.class, w.classKnown)
	if name == "" {
		return nil
	}
	p := &Provisioning{Provisioner: name, Annotated: w.annotatedProvisioner() == name,
		WaitForFirstConsumer: binder.DelayBinding(w.class), SelectedNode: w.claim.Annotations[storagehelpers.AnnSelectedNode]}
	for _, cn := range w.in.CSINodes {
		for _, d := range cn.Spec.Drivers {
			if d.Name == name {
				p.DriverNodes = append(p.DriverNodes, cn.Name)
			}
		}
	}
	p.Leases = w.leases(name)
	p.Pods = w.podsUsing()
	w.events(p)
	if driver, volume, ok := inflight.Volume(w.claim); ok || inflight.Holds(w.claim) {
		p.InFlight = &InFlight{Volume: volume, Driver: driver, Since: w.firstAttempt(name)}
	}
	p.Capacity = w.capacity()
	p.ProvisionerRunning, p.Evidence = w.running(p)
	if p.SelectedNode != "" {
		p.NodeProvisioner = nodeProvisioner(p)
	}
	return p
}

func (w *world) annotatedProvisioner() string { return annotatedProvisioner(w.claim) }

func annotatedProvisioner(c *v1.PersistentVolumeClaim) string {
	if v := c.Annotations[storagehelpers.AnnStorageProvisioner]; v != "" {
		return v
	}
	return c.Annotations[storagehelpers.AnnBetaStorageProvisioner]
}

// provisionerOf is the provisioner that serves the claim: its class's (a
// migrated in-tree plugin's CSI driver, as the binder hands them), or the
// one the binder handed it to when classes could not be read; "" for none.
func provisionerOf(c *v1.PersistentVolumeClaim, class *storagev1.StorageClass, classKnown bool) string {
	name := ""
	switch {
	case class != nil:
		name = class.Provisioner
	case !classKnown:
		name = annotatedProvisioner(c)
	}
	if name == "" || name == storagehelpers.NotSupportedProvisioner {
		return ""
	}
	if driver, ok := migration.CSIDriverFor(name); ok {
		name = driver
	}
	return name
}

// NodeLeasesLooked is how many nodes' provisioner Leases LeaseNames names
// for a claim with no selected node (a node-deployment provisioner of an
// Immediate class may run on any of them).
const NodeLeasesLooked = 3

// LeaseNames are the provisioner Leases an explanation of the claim looks
// at: the driver's central one, and the selected node's (or, with none
// selected, the first NodeLeasesLooked nodes' whose CSINode lists the
// driver). classesKnown is false when classes could not be read.
func LeaseNames(c *v1.PersistentVolumeClaim, classes []*storagev1.StorageClass, classesKnown bool, csiNodes []*storagev1.CSINode) []string {
	needs, _ := binder.ParseClaim(c)
	var class *storagev1.StorageClass
	for _, sc := range classes {
		if sc.Name == needs.Class {
			class = sc
		}
	}
	driver := provisionerOf(c, class, classesKnown)
	if driver == "" || binder.BindCompleted(c) || c.Spec.VolumeName != "" {
		return nil
	}
	names := []string{LeaseName(driver, "")}
	if node := c.Annotations[storagehelpers.AnnSelectedNode]; node != "" {
		return append(names, LeaseName(driver, node))
	}
	var nodes []string
	for _, cn := range csiNodes {
		if slices.ContainsFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver }) {
			nodes = append(nodes, cn.Name)
		}
	}
	slices.Sort(nodes)
	for _, n := range nodes[:min(len(nodes), NodeLeasesLooked)] {
		names = append(names, LeaseName(driver, n))
	}
	return names
}

// nonName is what a Lease name cannot hold; tether's provisioner (as
// external-provisioner) names its Lease after the driver with these
// replaced by '-', plus "-<node>" in node-deployment mode.
var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// LeaseName is the Lease a provisioner of driver elects on (node "" for a
// central one).
func LeaseName(driver, node string) string {
	s := driver
	if node != "" {
		s += "-" + node
	}
	return strings.Trim(nonName.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

func (w *world) leases(driver string) []Lease {
	central := LeaseName(driver, "")
	nodes := map[string]string{} // lease name -> node
	for _, cn := range w.in.CSINodes {
		nodes[LeaseName(driver, cn.Name)] = cn.Name
	}
	var out []Lease
	for _, l := range w.in.Leases {
		node, isNode := nodes[l.Name]
		if l.Name != central && !isNode && !strings.HasPrefix(l.Name, central+"-") {
			continue
		}
		if !isNode && l.Name != central {
			node = strings.TrimPrefix(l.Name, central+"-") // a node without a CSINode
		}
		out = append(out, leaseOf(l, node, w.in.Now))
	}
	slices.SortFunc(out, func(a, b Lease) int { return cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return out
}

// running says whether a provisioner for the driver runs, and on what.
func (w *world) running(p *Provisioning) (string, string) {
	for _, l := range p.Leases {
		if l.Held {
			return "yes", fmt.Sprintf("Lease %s/%s is held by %s", l.Namespace, l.Name, l.Holder)
		}
	}
	for i := len(p.Events) - 1; i >= 0; i-- {
		if e := p.Events[i]; e.From != "" && strings.HasPrefix(e.From, p.Provisioner+"_") {
			return "yes", fmt.Sprintf("its provisioner (%s) recorded %s on the claim %s", e.From, e.Reason, ago(w.in.Now, e.Last))
		}
	}
	if p.InFlight != nil {
		return "yes", "the claim holds tether's in-flight record for driver " + p.InFlight.Driver
	}
	if len(p.Capacity) > 0 {
		return "likely", fmt.Sprintf("no Lease is held, but %d CSIStorageCapacity object(s) of class %q are published, which a provisioner with --enable-capacity does (they outlive it unless owned by its pod or DaemonSet)",
			len(p.Capacity), w.needs.Class)
	}
	if w.in.unreadable("leases") {
		return "unknown", "leases could not be read, and the provisioner has not acted on the claim"
	}
	return "no", "no Lease for the driver is held and no provisioner has acted on the claim (a provisioner without leader election leaves no Lease, so this is a strong hint, not proof)"
}

func nodeProvisioner(p *Provisioning) string {
	anyNode := false
	for _, l := range p.Leases {
		if l.Node == "" {
			continue
		}
		anyNode = true
		if l.Node == p.SelectedNode && l.Held {
			return fmt.Sprintf("yes: Lease %s/%s is held by %s", l.Namespace, l.Name, l.Holder)
		}
	}
	for _, c := range p.Capacity {
		if c.SelectedNode {
			return fmt.Sprintf("probably: capacity is published for the node's segment (%s)", c.Segment)
		}
	}
	if anyNode {
		return "no node-deployment provisioner holds a Lease for node " + p.SelectedNode
	}
	if p.ProvisionerRunning == "yes" && slices.ContainsFunc(p.Leases, func(l Lease) bool { return l.Node == "" && l.Held }) {
		return "not needed: a central provisioner runs"
	}
	return "cannot tell: node-deployment provisioners without leader election leave no Lease"
}

// podsUsing are the pods of the namespace that use the claim.
func (w *world) podsUsing() []Pod {
	var out []Pod
	for _, pod := range w.in.Pods {
		if !usesClaim(pod, w.claim.Name) || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		p := Pod{Name: pod.Name, Node: pod.Spec.NodeName, Scheduled: pod.Spec.NodeName != ""}
		if !p.Scheduled {
			for _, c := range pod.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
					p.Scheduler = c.Message
				}
			}
			if e := w.lastEvent("Pod", pod.Name, "FailedScheduling"); e != nil && p.Scheduler == "" {
				p.Scheduler = e.Message
			}
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Pod) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func usesClaim(pod *v1.Pod, claim string) bool {
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
		if vol.Ephemeral != nil && pod.Name+"-"+vol.Name == claim {
			return true
		}
	}
	return false
}

func eventTime(e *v1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

func (w *world) eventsAbout(kind, name string) []*v1.Event {
	var out []*v1.Event
	for _, e := range w.in.Events {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name &&
			(kind != "PersistentVolumeClaim" || e.InvolvedObject.UID == "" || e.InvolvedObject.UID == w.claim.UID) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b *v1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	return out
}

func (w *world) lastEvent(kind, name, reason string) *v1.Event {
	var last *v1.Event
	for _, e := range w.eventsAbout(kind, name) {
		if e.Reason == reason {
			last = e
		}
	}
	return last
}

func source(e *v1.Event) string {
	if e.Source.Component != "" {
		return e.Source.Component
	}
	return e.ReportingController
}

// events fills the claim's events and the last provisioning failure.
func (w *world) events(p *Provisioning) {
	for _, e := range w.eventsAbout("PersistentVolumeClaim", w.claim.Name) {
		p.Events = append(p.Events, EventLine{Type: e.Type, Reason: e.Reason, Message: e.Message, From: source(e),
			Count: max(e.Count, 1), Last: eventTime(e)})
	}
	e := w.lastEvent("PersistentVolumeClaim", w.claim.Name, binder.ReasonProvisioningFailed)
	if e == nil {
		return
	}
	f := &Failure{Message: e.Message, Count: max(e.Count, 1), First: e.FirstTimestamp.Time, Last: eventTime(e)}
	if f.First.IsZero() {
		f.First = f.Last
	}
	if infeasibleError(f.Message) {
		f.Retry = fmt.Sprintf("failed %d time(s), last %s; the driver refused the request as it stands (InvalidArgument or OutOfRange): the provisioner tries again at once when the claim, its StorageClass or its VolumeAttributesClass changes, and otherwise only every --retry-interval-max", f.Count, ago(w.in.Now, f.Last))
	} else if inflight.Holds(w.claim) {
		f.Retry = fmt.Sprintf("failed %d time(s), last %s; the in-flight record is held: the provisioner retries with backoff and the volume may exist", f.Count, ago(w.in.Now, f.Last))
	} else {
		f.Retry = fmt.Sprintf("failed %d time(s), last %s; no in-flight record: the driver's answer was final, and the provisioner retries with backoff (up to its --retry-interval-max)", f.Count, ago(w.in.Now, f.Last))
	}
	p.LastFailure = f
}

// firstAttempt is when the events first show the provisioner at work.
func (w *world) firstAttempt(driver string) *time.Time {
	for _, e := range w.eventsAbout("PersistentVolumeClaim", w.claim.Name) {
		if e.Reason == "Provisioning" || strings.HasPrefix(source(e), driver+"_") {
			t := e.FirstTimestamp.Time
			if t.IsZero() {
				t = eventTime(e)
			}
			return &t
		}
	}
	return nil
}

// capacity lists the class's CSIStorageCapacity objects against the request.
func (w *world) capacity() []Capacity {
	var out []Capacity
	for _, c := range w.in.Capacities {
		if c.StorageClassName != w.needs.Class {
			continue
		}
		cp := Capacity{Namespace: c.Namespace, Name: c.Name, Segment: segment(c.NodeTopology)}
		var limit *resource.Quantity
		if c.Capacity != nil {
			cp.Capacity, limit = c.Capacity.String(), c.Capacity
		}
		if c.MaximumVolumeSize != nil {
			cp.MaximumVolumeSize, limit = c.MaximumVolumeSize.String(), c.MaximumVolumeSize
		}
		cp.Enough = limit != nil && limit.Cmp(w.needs.Request) >= 0
		if n := w.in.SelectedNode; n != nil && c.NodeTopology != nil {
			if sel, err := metav1.LabelSelectorAsSelector(c.NodeTopology); err == nil && sel.Matches(labels.Set(n.Labels)) {
				cp.SelectedNode = true
			}
		}
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b Capacity) int { return cmp.Compare(a.Segment, b.Segment) })
	return out
}

func segment(s *metav1.LabelSelector) string {
	if s == nil {
		return "(everywhere)"
	}
	var parts []string
	for k, v := range s.MatchLabels {
		parts = append(parts, k+"="+v)
	}
	for _, r := range s.MatchExpressions {
		parts = append(parts, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
