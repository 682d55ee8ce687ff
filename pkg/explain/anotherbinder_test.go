package explain

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAnotherBinder(t *testing.T) {
	now := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	at := func(e *v1.Event, ago time.Duration) *v1.Event {
		e.LastTimestamp = metav1.NewTime(now.Add(-ago))
		return e
	}
	older := at(event("data", "AnotherBinder", "kube-controller-manager wrote spec.volumeName", "persistentvolume-controller", 1), time.Hour)
	newer := at(event("data", "AnotherBinder", "kube-controller-manager wrote status.phase", "persistentvolume-controller", 3), time.Minute)
	other := at(event("data", "FailedBinding", "no volume", "persistentvolume-controller", 1), 0)
	for _, tc := range []struct {
		name   string
		events []*v1.Event
		want   string
	}{
		{"none", nil, ""},
		{"another reason only", []*v1.Event{other}, ""},
		{"the latest of two", []*v1.Event{older, other, newer}, "kube-controller-manager wrote status.phase"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Explain(Input{Now: now, Claim: newClaim("data", "fast", "1Gi", bound("pv-1")), AnotherBinder: tc.events})
			got := ""
			if e.AnotherBinder != nil {
				got = e.AnotherBinder.Message
			}
			if got != tc.want {
				t.Errorf("AnotherBinder = %+v, want message %q", e.AnotherBinder, tc.want)
			}
		})
	}
}
