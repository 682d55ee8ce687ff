package explain

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// consumerCause explains a claim of a class that waits for its first
// consumer, with no node selected yet; nil when its pods are scheduled (the
// selected node should follow).
func (w *world) consumerCause(onceScheduled string) *Cause {
	if w.in.unreadable("pods") {
		return &Cause{Reason: CauseWaitForFirstConsumer, Message: "the class waits for the first consumer, and pods could not be read to see whether one exists",
			Action: "make sure a pod uses the claim"}
	}
	pods := w.podsUsing()
	best := ""
	if onceScheduled != "" {
		best = fmt.Sprintf("; volume %s would then be bound", onceScheduled)
	}
	if len(pods) == 0 {
		return &Cause{Reason: CauseWaitForFirstConsumer,
			Message: fmt.Sprintf("the class %q waits for the first consumer, and no pod uses the claim%s", w.needs.Class, best),
			Action:  fmt.Sprintf("create a pod that uses claim %s: binding and provisioning start once the scheduler picks its node", w.claim.Name)}
	}
	var unscheduled []Pod
	for _, p := range pods {
		if !p.Scheduled {
			unscheduled = append(unscheduled, p)
		}
	}
	if len(unscheduled) == 0 {
		return nil
	}
	p := unscheduled[0]
	if c := w.capacity(); strings.Contains(p.Scheduler, "enough free storage") || (len(c) > 0 && !slices.ContainsFunc(c, func(c Capacity) bool { return c.Enough })) {
		return w.noCapacity(c, fmt.Sprintf("pod %s is not scheduled: %s", p.Name, orNone(p.Scheduler)))
	}
	return &Cause{Reason: CausePodNotScheduled,
		Message: fmt.Sprintf("the class waits for the first consumer, and pod %s is not scheduled: %s", p.Name, orNone(p.Scheduler)),
		Action:  "fix what keeps the scheduler from placing the pod (its message above)"}
}

func orNone(s string) string {
	if s == "" {
		return "the scheduler has not said why yet"
	}
	return s
}

// noCapacity is the cause when no topology segment has room for the request.
func (w *world) noCapacity(caps []Capacity, why string) *Cause {
	var most resource.Quantity
	var where []string
	for _, c := range caps {
		q := c.MaximumVolumeSize
		if q == "" {
			q = c.Capacity
		}
		if v, err := resource.ParseQuantity(q); err == nil && v.Cmp(most) > 0 {
			most = v
		}
		where = append(where, c.Segment+" has "+orDash(q))
	}
	msg := fmt.Sprintf("no topology segment has room for %s of class %q", w.needs.Request.String(), w.needs.Class)
	if len(where) > 0 {
		msg += " (" + strings.Join(where, "; ") + ")"
	}
	if why != "" {
		msg += "; " + why
	}
	action := fmt.Sprintf("free capacity for class %q on a node of the driver, add a node or storage", w.needs.Class)
	if len(caps) > 0 {
		action += fmt.Sprintf(", or ask for at most %s", most.String())
	}
	return &Cause{Reason: CauseNoCapacity, Message: msg, Action: action}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// dynamicCause explains a claim whose class names a provisioner.
func (w *world) dynamicCause(p *Provisioning, onceScheduled string) *Cause {
	if p.WaitForFirstConsumer && p.SelectedNode == "" {
		if c := w.consumerCause(onceScheduled); c != nil {
			return c
		}
		return &Cause{Reason: CauseWaitForFirstConsumer, Message: "the claim's pods are scheduled but the scheduler has not set volume.kubernetes.io/selected-node yet",
			Action: "wait a moment; if it stays so, check kube-scheduler"}
	}
	if !p.Annotated {
		return &Cause{Reason: CauseNotAnnotated,
			Message: fmt.Sprintf("the claim is not yet handed to provisioner %q (no volume.kubernetes.io/storage-provisioner annotation); the binder %s", p.Provisioner, w.binderText),
			Action:  "the binder writes the annotation at its next sync of the claim; " + w.checkBinder()}
	}
	if f := p.LastFailure; f != nil {
		if isCapacityError(f.Message) {
			return w.noCapacity(p.Capacity, "the driver says: "+f.Message)
		}
		return &Cause{Reason: CauseProvisioningFailed,
			Message: fmt.Sprintf("provisioning failed: %s (%s)", f.Message, f.Retry),
			Action:  fmt.Sprintf("fix what driver %q reports (the class's parameters, the driver's backend, or the claim), then the next retry succeeds", p.Provisioner)}
	}
	if p.InFlight != nil {
		since := ""
		if p.InFlight.Since != nil {
			since = ", first attempt " + ago(w.in.Now, *p.InFlight.Since)
		}
		return &Cause{Reason: CauseProvisioning,
			Message: fmt.Sprintf("driver %q is creating volume %q (tether's in-flight record%s)", p.InFlight.Driver, p.InFlight.Volume, since),
			Action:  "wait; if it takes long, read the provisioner's and the driver's logs for this volume"}
	}
	if len(p.Capacity) > 0 && !slices.ContainsFunc(p.Capacity, func(c Capacity) bool {
		return c.Enough && (p.SelectedNode == "" || c.SelectedNode)
	}) {
		return w.noCapacity(p.Capacity, "")
	}
	switch p.ProvisionerRunning {
	case "no":
		return &Cause{Reason: CauseNoProvisioner,
			Message: fmt.Sprintf("no provisioner for %q is seen running: %s", p.Provisioner, p.Evidence),
			Action:  fmt.Sprintf("start the provisioner for driver %q (for tether: cmd/provisioner beside the driver)", p.Provisioner)}
	case "unknown":
		return &Cause{Reason: CauseUnknown,
			Message: fmt.Sprintf("waiting for provisioner %q; whether it runs cannot be told: %s", p.Provisioner, p.Evidence),
			Action:  fmt.Sprintf("ask an administrator to check that the provisioner for driver %q runs", p.Provisioner)}
	}
	if p.SelectedNode != "" && strings.HasPrefix(p.NodeProvisioner, "no ") {
		return &Cause{Reason: CauseNoNodeProvisioner, Message: p.NodeProvisioner,
			Action: fmt.Sprintf("start the node-deployment provisioner of driver %q on node %s", p.Provisioner, p.SelectedNode)}
	}
	return &Cause{Reason: CauseWaitingForProvisioner,
		Message: fmt.Sprintf("waiting for provisioner %q (%s); it has not reported a failure", p.Provisioner, p.Evidence),
		Action:  "wait; if it takes long, read the provisioner's logs for this claim"}
}

func isCapacityError(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "resourceexhausted") || strings.Contains(m, "insufficient capacity") ||
		strings.Contains(m, "not enough space") || strings.Contains(m, "out of capacity")
}

// infeasibleError reports whether a failure is a CreateVolume the driver
// refused as infeasible (provisioner.Classify), after which the provisioner
// waits for an edit of the claim or its classes.
func infeasibleError(msg string) bool {
	return strings.Contains(msg, "code = InvalidArgument") || strings.Contains(msg, "code = OutOfRange")
}
