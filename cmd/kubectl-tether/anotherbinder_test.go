package main

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// anotherBinderEvents reports whether a field selector picks AnotherBinder
// events only.
func anotherBinderEvents(selector string) bool {
	return strings.Contains(selector, "reason=AnotherBinder")
}

// TestWhyAnotherBinder: a bound claim that another PV binder wrote (an
// AnotherBinder event on it) gets a line saying so; one without gets none.
func TestWhyAnotherBinder(t *testing.T) {
	claim := pvc("bound", "manual", "1Gi", boundTo("pv-1"))
	event := &v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bound.another"},
		InvolvedObject: v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "bound", UID: claim.UID},
		Reason:         "AnotherBinder", Type: v1.EventTypeWarning, Count: 2,
		Message:       "kube-controller-manager wrote spec.volumeName at 2026-11-28T03:54:23Z, after tether's binder started",
		LastTimestamp: metav1.NewTime(time.Now().Add(-time.Minute))}
	objs := []*fake.Clientset{
		fake.NewClientset(manualClass(), claim, pv("pv-1", "manual", "1Gi", "bound"), event),
		fake.NewClientset(manualClass(), claim, pv("pv-1", "manual", "1Gi", "bound")),
	}
	out, status := whyOut(t, objs[0], "bound")
	if status != 0 || !strings.Contains(out, "  another binder: kube-controller-manager wrote spec.volumeName at 2026-11-28T03:54:23Z, after tether's binder started (2 time(s), last 1m") {
		t.Errorf("with the event: status %d\n%s", status, out)
	}
	out, _ = whyOut(t, objs[1], "bound")
	if strings.Contains(out, "another binder") {
		t.Errorf("without the event:\n%s", out)
	}
}
