package provisioner

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tether-csi/tether/pkg/inflight"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/informers"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
)

func TestDecideInfeasible(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	spec := func(size string, vac string) v1.PersistentVolumeClaimSpec {
		s := v1.PersistentVolumeClaimSpec{Resources: v1.VolumeResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}}}
		if vac != "" {
			s.VolumeAttributesClassName = ptr.To(vac)
		}
		return s
	}
	refused := requestShape{Spec: spec("1Gi", "gold"), Annotations: map[string]string{"a": "1"}, Class: "uid-c/5", AttributesCls: "uid-v/9"}
	same := refused
	same.Spec = spec("1024Mi", "gold") // the same quantity, written otherwise
	same.Annotations = map[string]string{"a": "1"}
	with := func(change func(*requestShape)) requestShape {
		s := refused
		s.Annotations = map[string]string{"a": "1"}
		change(&s)
		return s
	}
	wait := &infeasibleWait{Shape: refused, Since: t0}
	tests := []struct {
		name     string
		in       infeasibleInput
		want     infeasibleStep
		wantName string
	}{
		{name: "no wait", in: infeasibleInput{Current: refused, Interval: time.Minute, Now: t0}, want: infeasibleNone, wantName: "none"},
		{name: "the wait is off", in: infeasibleInput{Wait: wait, Current: refused, Now: t0}, want: infeasibleNone, wantName: "none"},
		{name: "just refused", in: infeasibleInput{Wait: wait, Current: refused, Interval: time.Minute, Now: t0}, want: infeasibleWaiting, wantName: "waiting"},
		{name: "nothing changed, within the interval", in: infeasibleInput{Wait: wait, Current: same, Interval: time.Minute, Now: t0.Add(59 * time.Second)}, want: infeasibleWaiting},
		{name: "nothing changed, the interval passed", in: infeasibleInput{Wait: wait, Current: same, Interval: time.Minute, Now: t0.Add(time.Minute)}, want: infeasibleDue, wantName: "due"},
		{name: "a clock stepped back", in: infeasibleInput{Wait: wait, Current: refused, Interval: time.Minute, Now: t0.Add(-time.Hour)}, want: infeasibleWaiting},
		{name: "another VolumeAttributesClass", in: infeasibleInput{Wait: wait, Current: with(func(s *requestShape) { s.Spec = spec("1Gi", "silver") }), Interval: time.Minute, Now: t0}, want: infeasibleEdited, wantName: "edited"},
		{name: "another size", in: infeasibleInput{Wait: wait, Current: with(func(s *requestShape) { s.Spec = spec("2Gi", "gold") }), Interval: time.Minute, Now: t0}, want: infeasibleEdited},
		{name: "an annotation", in: infeasibleInput{Wait: wait, Current: with(func(s *requestShape) { s.Annotations["b"] = "2" }), Interval: time.Minute, Now: t0}, want: infeasibleEdited},
		{name: "the StorageClass edited", in: infeasibleInput{Wait: wait, Current: with(func(s *requestShape) { s.Class = "uid-c/6" }), Interval: time.Minute, Now: t0}, want: infeasibleEdited},
		{name: "the StorageClass made again", in: infeasibleInput{Wait: wait, Current: with(func(s *requestShape) { s.Class = "uid-d/7" }), Interval: time.Minute, Now: t0}, want: infeasibleEdited},
		{name: "the StorageClass gone", in: infeasibleInput{Wait: wait, Current: with(func(s *requestShape) { s.Class = "" }), Interval: time.Minute, Now: t0}, want: infeasibleEdited},
		{name: "the VolumeAttributesClass made again", in: infeasibleInput{Wait: wait, Current: with(func(s *requestShape) { s.AttributesCls = "uid-w/1" }), Interval: time.Minute, Now: t0}, want: infeasibleEdited},
		{name: "changed and due: edited", in: infeasibleInput{Wait: wait, Current: with(func(s *requestShape) { s.Annotations = nil }), Interval: time.Minute, Now: t0.Add(time.Hour)}, want: infeasibleEdited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideInfeasible(tt.in)
			if got != tt.want {
				t.Errorf("decideInfeasible = %s, want %s", got, tt.want)
			}
			if tt.wantName != "" && got.String() != tt.wantName {
				t.Errorf("String() = %q, want %q", got.String(), tt.wantName)
			}
		})
	}
}

// requeued is a fake InfeasibleOptions.Requeue.
type requeued struct {
	keys  []string
	after []time.Duration
}

func (r *requeued) requeue(key string, after time.Duration) {
	r.keys, r.after = append(r.keys, key), append(r.after, after)
}

const annProvisioner = "volume.kubernetes.io/storage-provisioner"

// TestInfeasibleWait: a claim whose CreateVolume the driver refuses as
// infeasible gets a Warning event and a count, keeps its record, and is
// declined by ShouldProvision until it or its class is edited or the
// interval has passed, when it is handed back to the library; any other
// answer ends the wait.
func TestInfeasibleWait(t *testing.T) {
	const interval = 5 * time.Minute
	e := newEnv(t)
	var rq requeued
	reg := prometheus.NewRegistry()
	if err := e.p.WaitInfeasible(InfeasibleOptions{Interval: interval, Requeue: rq.requeue, Recorder: e.recorder, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	e.createClaim(newClaim(claimAnn(annProvisioner, driverNm)))
	should := func() bool { return e.p.ShouldProvision(e.ctx, e.cachedClaim(testClaim)) }
	refuse := func(err error) {
		t.Helper()
		e.driver.fail = err
		_, state, perr := e.provision(e.cachedClaim(testClaim))
		if perr == nil || state != controller.ProvisioningFinished {
			t.Fatalf("Provision = %v, %q; want an error, finished", perr, state)
		}
		e.refresh()
	}
	refused := status.Error(codes.InvalidArgument, "parameter iops: 99999 is more than 16000")

	if !should() {
		t.Fatal("a new claim declined")
	}
	refuse(refused)
	ev := e.events()
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning ProvisioningInfeasible ") ||
		!strings.Contains(ev[0], "waits for an edit of the claim, its StorageClass or its VolumeAttributesClass") ||
		!strings.Contains(ev[0], "InvalidArgument") || !strings.Contains(ev[0], "is more than 16000") || !strings.Contains(ev[0], "5m0s") {
		t.Errorf("events %q", ev)
	}
	if got := testutil.ToFloat64(e.p.infeasible.refused); got != 1 {
		t.Errorf("tether_provisioner_infeasible_total = %v, want 1", got)
	}
	if len(rq.keys) != 1 || rq.keys[0] != testNS+"/"+testClaim || rq.after[0] != interval {
		t.Errorf("requeued %v after %v", rq.keys, rq.after)
	}
	if !e.holdsRecord(testClaim) || !e.p.answers.noVolume(e.cachedClaim(testClaim).UID) {
		t.Error("the refusal changed the record's bookkeeping")
	}
	if should() {
		t.Error("declined: no; want the claim to wait")
	}
	e.clock = e.clock.Add(interval - time.Second)
	if should() {
		t.Error("the claim stopped waiting before the interval")
	}
	// The in-flight record's own annotations are no edit.
	format := e.apiClaim(testClaim).Annotations[inflight.AnnFormat]
	for _, f := range []string{"0", format} {
		e.updateClaim(testClaim, func(c *v1.PersistentVolumeClaim) { c.Annotations[inflight.AnnFormat] = f })
		e.refresh()
		if should() {
			t.Errorf("a change of the record's format to %q ended the wait", f)
		}
	}

	// An edit of the claim: provisioned at once.
	e.updateClaim(testClaim, func(c *v1.PersistentVolumeClaim) { c.Annotations["example.com/poke"] = "1" })
	e.refresh()
	if !should() {
		t.Fatal("an edited claim still waits")
	}
	refuse(status.Error(codes.OutOfRange, "at most 64Ti"))
	if should() {
		t.Error("a claim refused with OutOfRange does not wait")
	}
	// An edit of the class.
	edited := e.class.DeepCopy()
	edited.ResourceVersion = "8"
	if err := e.classes.Update(edited); err != nil {
		t.Fatal(err)
	}
	if !should() {
		t.Fatal("the class changed, and the claim still waits")
	}
	refuse(refused)
	// The interval passed: one more try, and the wait stays until it answers.
	e.clock = e.clock.Add(interval)
	for range 2 { // asked again before the call answers
		if !should() {
			t.Fatal("the interval passed, and the claim still waits")
		}
	}
	// Any other answer ends the wait.
	refuse(status.Error(codes.Internal, "backend hiccup"))
	if !should() {
		t.Error("the claim waits after an answer that is not a refusal")
	}
	if got := testutil.ToFloat64(e.p.infeasible.refused); got != 3 {
		t.Errorf("tether_provisioner_infeasible_total = %v, want 3", got)
	}
	if len(rq.keys) != 3 {
		t.Errorf("requeued %d times, want 3", len(rq.keys))
	}
	for _, ev := range e.events() {
		if strings.Contains(ev, ReasonProvisioningInfeasible) {
			continue
		}
		t.Errorf("event %q", ev)
	}
	// A success ends it too.
	refuse(refused)
	e.driver.fail = nil
	e.clock = e.clock.Add(interval)
	if _, _, err := e.provision(e.cachedClaim(testClaim)); err != nil {
		t.Fatal(err)
	}
	if _, at := e.p.infeasible.memo.get(e.cachedClaim(testClaim).UID); !at.IsZero() {
		t.Error("the wait outlived the volume")
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "tether_provisioner_infeasible_total" {
		t.Errorf("registered %v, %v", mfs, err)
	}
}

// TestInfeasibleNotWired: without WaitInfeasible (or with no interval) a
// refused claim is retried at the library's backoff, and still counted.
func TestInfeasibleNotWired(t *testing.T) {
	for _, wire := range []bool{false, true} {
		e := newEnv(t)
		if wire {
			if err := e.p.WaitInfeasible(InfeasibleOptions{Recorder: e.recorder}); err != nil {
				t.Fatal(err)
			}
		}
		e.createClaim(newClaim(claimAnn(annProvisioner, driverNm)))
		e.driver.fail = status.Error(codes.InvalidArgument, "no")
		if _, _, err := e.provision(e.cachedClaim(testClaim)); err == nil {
			t.Fatal("Provision succeeded")
		}
		e.refresh()
		if !e.p.ShouldProvision(e.ctx, e.cachedClaim(testClaim)) {
			t.Errorf("wired %v: the claim waits without an interval", wire)
		}
		if got := testutil.ToFloat64(e.p.infeasible.refused); got != 1 {
			t.Errorf("wired %v: count %v, want 1", wire, got)
		}
		ev := e.events()
		if wire && (len(ev) != 1 || strings.Contains(ev[0], "tried again")) {
			t.Errorf("events %q", ev)
		}
	}
	e := newEnv(t)
	if err := e.p.WaitInfeasible(InfeasibleOptions{Interval: time.Minute}); err == nil {
		t.Error("a wait without Requeue was accepted")
	}
}

// TestInfeasibleClassChanged: a change of a StorageClass or a
// VolumeAttributesClass hands back at once the claims that wait on it, and
// only those.
func TestInfeasibleClassChanged(t *testing.T) {
	e := newEnv(t)
	var rq requeued
	classes := informers.NewSharedInformerFactory(e.client, 0).Storage().V1()
	if err := e.p.WaitInfeasible(InfeasibleOptions{Interval: time.Hour, Requeue: rq.requeue,
		Classes: classes.StorageClasses().Informer(), AttributesClasses: classes.VolumeAttributesClasses().Informer()}); err != nil {
		t.Fatal(err)
	}
	e.createClaim(newClaim(claimAnn(annProvisioner, driverNm), vacName("gold")))
	e.driver.fail = status.Error(codes.InvalidArgument, "no")
	e.p.answeredInfeasible(e.ctx, e.cachedClaim(testClaim), e.p.shape(e.cachedClaim(testClaim)), Infeasible, e.driver.fail)
	rq = requeued{}
	key := testNS + "/" + testClaim
	for _, tt := range []struct {
		name, class string
		want        []string
	}{
		{"its StorageClass", testClass, []string{key}},
		{"another StorageClass", "slow", nil},
	} {
		rq = requeued{}
		e.p.infeasible.requeueOn(tt.class, func(w infeasibleWait) string { return w.Class })
		if !slices.Equal(rq.keys, tt.want) || (len(rq.after) > 0 && rq.after[0] != 0) {
			t.Errorf("%s: requeued %v after %v, want %v at once", tt.name, rq.keys, rq.after, tt.want)
		}
	}
	for _, tt := range []struct {
		name, vac string
		want      []string
	}{
		{"its VolumeAttributesClass", "gold", []string{key}},
		{"another VolumeAttributesClass", "silver", nil},
		{"a VolumeAttributesClass named as its StorageClass", testClass, nil},
	} {
		rq = requeued{}
		e.p.infeasible.requeueOn(tt.vac, func(w infeasibleWait) string { return w.AttributesClass })
		if !slices.Equal(rq.keys, tt.want) {
			t.Errorf("%s: requeued %v, want %v", tt.name, rq.keys, tt.want)
		}
	}
}
