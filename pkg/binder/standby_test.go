package binder

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// A replica standing by for the lease fills its caches (Start) so that it
// binds as soon as it leads; until then it must write nothing, and serve
// none of the gauges computed from the caches (the leader serves them).
func TestStandbyWarmsCachesAndWritesNothing(t *testing.T) {
	class := newClass("fast", "csi.example.com")
	claim := newPVC("c", "1Gi", claimClass("fast"))
	pv := newPV("pv", "1Gi", pvClass("fast"))
	client := fake.NewClientset(class, claim, pv)
	client.PrependReactor("update", "*", bumpVersion())
	reg := prometheus.NewRegistry()
	c, err := New(Options{Client: client, Workers: 2, Recorder: record.NewFakeRecorder(100), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterPendingMetrics(reg, c); err != nil {
		t.Fatal(err)
	}
	standby, stopStandby := context.WithCancel(t.Context())
	defer stopStandby()
	c.Start(standby)
	c.Start(standby) // twice: nothing starts twice
	if !pollUntil(10*time.Second, c.Synced) {
		t.Fatal("the standby's caches did not sync")
	}
	if _, ok := c.claims.Get(ns, "c"); !ok || c.volumes.Len() != 1 {
		t.Fatalf("standby caches: claim cached %v, volumes %d; want the claim and 1 volume", ok, c.volumes.Len())
	}
	// Standing by a while: the claim and the volume are queued, and no
	// worker takes them.
	pollUntil(300*time.Millisecond, func() bool { return writes(client) > 0 })
	if n := writes(client); n != 0 {
		t.Fatalf("the standby wrote %d times: %v", n, client.Actions())
	}
	for _, name := range []string{"tether_binder_pending_claims", "pv_collector_unbound_pvc_count", "pv_collector_total_pv_count"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
			t.Errorf("standby serves %s: %d series (err %v), want none", name, n, err)
		}
	}

	// It leads: Run finds the informers started and binds at once.
	runController(t, c)
	if !pollUntil(10*time.Second, func() bool {
		got, ok := c.claims.Get(ns, "c")
		return ok && got.Spec.VolumeName == "pv" && got.Status.Phase == v1.ClaimBound
	}) {
		t.Fatal("the claim was not bound once the standby led")
	}
	if n, err := testutil.GatherAndCount(reg, "pv_collector_bound_pvc_count"); err != nil || n != 1 {
		t.Errorf("leader serves pv_collector_bound_pvc_count: %d series (err %v), want 1", n, err)
	}
}

// writes counts the client's writes (anything but get, list and watch).
func writes(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			n++
		}
	}
	return n
}
