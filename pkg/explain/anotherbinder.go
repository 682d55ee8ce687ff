package explain

import (
	v1 "k8s.io/api/core/v1"

	"github.com/tether-csi/tether/pkg/binder"
)

// anotherBinder is the latest of the events that say another PV binder
// wrote the claim or its volume (binder.ReasonAnotherBinder, recorded by
// tether's binder: docs/binder.md, "Another binder"), nil for none. Events
// of other reasons are passed over.
func anotherBinder(events []*v1.Event) *EventLine {
	var last *EventLine
	for _, e := range events {
		if e == nil || e.Reason != binder.ReasonAnotherBinder {
			continue
		}
		l := EventLine{Type: e.Type, Reason: e.Reason, Message: e.Message, From: source(e),
			Count: max(e.Count, 1), Last: eventTime(e)}
		if last == nil || l.Last.After(last.Last) {
			last = &l
		}
	}
	return last
}
