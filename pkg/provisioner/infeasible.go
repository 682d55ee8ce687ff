package provisioner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tether-csi/tether/pkg/inflight"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// The wait for an edit. A CreateVolume that the driver refuses as
// Infeasible (answers.go) is refused again as long as the request stays
// the same, and the request changes only with an edit of the claim, of its
// StorageClass or of its VolumeAttributesClass. Such a claim is not
// retried at the library's backoff: ShouldProvision declines it until it
// or one of its classes changes, or until the wait's interval
// (--retry-interval-max) has passed since the last refusal, when the
// claim is handed back to the library (InfeasibleOptions.Requeue) for one
// more CreateVolume. An edit hands it to the library at once: the
// library queues a claim on every update, past its backoff, and a change
// of a class (made, edited, deleted) hands back the claims that wait on it
// (InfeasibleOptions.Classes, AttributesClasses). The API server keeps a
// pending claim's spec as it was made (its size and VolumeAttributesClass
// too) and deletes no VolumeAttributesClass a claim names: the edits a
// pending claim can get are of its annotations (a class's secret
// templates read them) and a StorageClass made again with other
// parameters.
//
// EP v6.4.0 (its library v13.1.0) skips such a claim's syncs for
// --retry-interval-max after an InvalidArgument, and stops skipping only
// when the claim's StorageClass is made again (another UID); an edit of
// the claim waits out the interval there.
//
// The wait is this process's memory only: the in-flight record stays as
// for any final error, and the refusal counts as no volume made
// (noVolumeMade) exactly as before.

// ReasonProvisioningInfeasible is the reason of the Warning event on a
// claim whose CreateVolume the driver refused as Infeasible.
const ReasonProvisioningInfeasible = "ProvisioningInfeasible"

// requestShape is what of a claim and its classes a CreateVolume request
// is made from and a user can edit: the claim's spec and annotations, and
// the version of its StorageClass and VolumeAttributesClass ("" for none
// read). Any change of it is an edit.
type requestShape struct {
	Spec                 v1.PersistentVolumeClaimSpec
	Annotations          map[string]string
	Class, AttributesCls string
}

// infeasibleWait is a claim's wait: the shape its refused request was
// made from, and when the driver refused it. Key (namespace/name), Class
// and AttributesClass (the names of the claim's classes) find the claims
// that wait on a class.
type infeasibleWait struct {
	Shape                       requestShape
	Since                       time.Time
	Key, Class, AttributesClass string
}

// infeasibleInput is what the wait is decided on.
type infeasibleInput struct {
	// Wait is the claim's wait (nil: none).
	Wait *infeasibleWait
	// Current is the shape of the claim and its classes now.
	Current requestShape
	// Interval is the wait's length (zero: no wait).
	Interval time.Duration
	Now      time.Time
}

// infeasibleStep is the decision.
type infeasibleStep int

const (
	// infeasibleNone: the claim does not wait; provision it.
	infeasibleNone infeasibleStep = iota
	// infeasibleEdited: the claim or a class changed since the refusal;
	// forget the wait and provision it now.
	infeasibleEdited
	// infeasibleDue: nothing changed and the interval has passed;
	// provision it (the answer starts a new wait or ends it).
	infeasibleDue
	// infeasibleWaiting: nothing changed and the interval has not passed;
	// decline it.
	infeasibleWaiting
)

func (s infeasibleStep) String() string {
	return [...]string{"none", "edited", "due", "waiting"}[s]
}

// decideInfeasible says whether a claim waits for an edit. Pure.
func decideInfeasible(in infeasibleInput) infeasibleStep {
	switch {
	case in.Wait == nil || in.Interval <= 0:
		return infeasibleNone
	case !equality.Semantic.DeepEqual(in.Wait.Shape, in.Current):
		return infeasibleEdited
	case in.Now.Sub(in.Wait.Since) >= in.Interval:
		return infeasibleDue
	}
	return infeasibleWaiting
}

// InfeasibleOptions wire the wait for an edit (see WaitInfeasible).
type InfeasibleOptions struct {
	// Interval is how long a refused claim waits without an edit
	// (--retry-interval-max); zero or less turns the wait off (the
	// event and the metric stay).
	Interval time.Duration
	// Requeue hands a claim, by its key (namespace/name), back to the
	// library after a delay (libv8.Claims.Requeue, on a timer).
	Requeue func(key string, after time.Duration)
	// Recorder receives the Warning events; nil for none.
	Recorder record.EventRecorder
	// Registerer, if set, registers tether_provisioner_infeasible_total.
	Registerer prometheus.Registerer
	// Classes and AttributesClasses, if set, are the StorageClass and
	// VolumeAttributesClass informers: a class made, changed or deleted
	// hands the claims that wait on it back to the library at once.
	Classes, AttributesClasses cache.SharedIndexInformer
}

// infeasibleWaits are the claims that wait for an edit, by UID. An entry
// goes when the claim is provisioned again (edited, due) and its answer is
// not a refusal, or once older than its keep (a claim deleted meanwhile).
type infeasibleWaits struct {
	memo    claimMemo[infeasibleWait]
	o       InfeasibleOptions
	refused prometheus.Counter
}

func newInfeasibleWaits() *infeasibleWaits {
	return &infeasibleWaits{
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_provisioner_infeasible_total",
			Help: "CreateVolume calls the driver refused as infeasible (InvalidArgument, OutOfRange): the claim then waits for an edit of itself or of its classes, and is tried again without one every --retry-interval-max; each has a ProvisioningInfeasible event on the claim."}),
	}
}

// WaitInfeasible wires the wait for an edit. Without it a refused claim is
// retried at the library's backoff, with the event and the count.
func (p *Provisioner) WaitInfeasible(o InfeasibleOptions) error {
	if o.Interval > 0 && o.Requeue == nil {
		return errors.New("provisioner: the wait for an edit needs Requeue")
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(p.infeasible.refused); err != nil {
			return err
		}
	}
	p.infeasible.memo.mu.Lock()
	p.infeasible.o = o
	// A deleted claim's wait is kept a while after its last refusal.
	p.infeasible.memo.keep = 3*o.Interval + time.Minute
	p.infeasible.memo.mu.Unlock()
	if o.Interval <= 0 {
		return nil
	}
	for _, watch := range []struct {
		inf cache.SharedIndexInformer
		of  func(infeasibleWait) string
	}{
		{o.Classes, func(w infeasibleWait) string { return w.Class }},
		{o.AttributesClasses, func(w infeasibleWait) string { return w.AttributesClass }},
	} {
		inf, of := watch.inf, watch.of
		if inf == nil {
			continue
		}
		changed := func(obj any) {
			if name, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				p.infeasible.requeueOn(name, of)
			}
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: changed,
			UpdateFunc: func(_, obj any) { changed(obj) }, DeleteFunc: changed}); err != nil {
			return err
		}
	}
	return nil
}

// requeueOn hands back at once the claims that wait on the class of the
// name (of: which of a wait's classes).
func (w *infeasibleWaits) requeueOn(name string, of func(infeasibleWait) string) {
	w.memo.mu.Lock()
	var keys []string
	for _, e := range w.memo.by {
		if of(e.v) == name {
			keys = append(keys, e.v.Key)
		}
	}
	requeue := w.o.Requeue
	w.memo.mu.Unlock()
	for _, k := range keys {
		requeue(k, 0)
	}
}

func (w *infeasibleWaits) options() InfeasibleOptions {
	w.memo.mu.Lock()
	defer w.memo.mu.Unlock()
	return w.o
}

// shape is the request shape of a claim and its classes now, as the
// caches hold them. The in-flight record's annotations are tether's own
// bookkeeping, not an edit: they are left out.
func (p *Provisioner) shape(claim *v1.PersistentVolumeClaim) requestShape {
	s := requestShape{Spec: claim.Spec, Annotations: inflight.Strip(claim).Annotations}
	if class, err := p.o.Classes.Get(ptr.Deref(claim.Spec.StorageClassName, "")); err == nil {
		s.Class = string(class.UID) + "/" + class.ResourceVersion
	}
	if name := ptr.Deref(claim.Spec.VolumeAttributesClassName, ""); name != "" && p.o.VolumeAttributesClasses != nil {
		if vac, err := p.o.VolumeAttributesClasses.Get(name); err == nil {
			s.AttributesCls = string(vac.UID) + "/" + vac.ResourceVersion
		}
	}
	return s
}

// waitsForEdit is ShouldProvision's part: whether the claim still waits
// for an edit after a refusal.
func (p *Provisioner) waitsForEdit(ctx context.Context, claim *v1.PersistentVolumeClaim) bool {
	w, at := p.infeasible.memo.get(claim.UID)
	if at.IsZero() {
		return false
	}
	step := decideInfeasible(infeasibleInput{Wait: &w, Current: p.shape(claim),
		Interval: p.infeasible.options().Interval, Now: p.now()})
	logger := klog.FromContext(ctx)
	switch step {
	case infeasibleEdited:
		logger.V(2).Info("The claim or its class changed since the driver refused it; provisioning it again", "pvc", klog.KObj(claim))
		p.infeasible.memo.forget(claim.UID)
	case infeasibleWaiting:
		logger.V(4).Info("The claim waits for an edit", "pvc", klog.KObj(claim), "since", w.Since)
	}
	return step == infeasibleWaiting
}

// answeredInfeasible notes the outcome of a claim's CreateVolume: a refusal starts
// (or renews) its wait, with its event and count and the hand-back after
// the interval; any other answer ends it. shape is the claim's, taken
// before the call.
func (p *Provisioner) answeredInfeasible(ctx context.Context, claim *v1.PersistentVolumeClaim, shape requestShape, outcome Outcome, err error) {
	if outcome != Infeasible {
		p.infeasible.memo.forget(claim.UID)
		return
	}
	o := p.infeasible.options()
	p.infeasible.refused.Inc()
	msg := fmt.Sprintf("The driver refused the volume as requested (%s): only an edit of the claim, its StorageClass or its VolumeAttributesClass changes the request", status.Code(err))
	if o.Interval > 0 {
		msg = fmt.Sprintf("The driver refused the volume as requested (%s): the claim waits for an edit of the claim, its StorageClass or its VolumeAttributesClass", status.Code(err))
		p.infeasible.memo.add(claim.UID, infeasibleWait{Shape: shape, Since: p.now(), Key: claim.Namespace + "/" + claim.Name,
			Class: ptr.Deref(claim.Spec.StorageClassName, ""), AttributesClass: ptr.Deref(claim.Spec.VolumeAttributesClassName, "")}, p.now())
		o.Requeue(claim.Namespace+"/"+claim.Name, o.Interval)
		msg += fmt.Sprintf(", and is tried again without one in %s", o.Interval)
	}
	if o.Recorder != nil {
		o.Recorder.Event(claim, v1.EventTypeWarning, ReasonProvisioningInfeasible, msg+": "+status.Convert(err).Message())
	}
	klog.FromContext(ctx).Info("The driver refused the claim's volume as requested", "pvc", klog.KObj(claim), "waitForEdit", o.Interval)
}
