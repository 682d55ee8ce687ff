package binder

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

// noticeForeign says so when obj, a claim or PV as the API server sent it
// to an informer, shows a write of another PV binder (ForeignBinderWrite)
// since the binder's cached copy: a Warning event AnotherBinder on obj, the
// counter tether_binder_foreign_binder_writes_total and a log line. Only
// the leader says it (a standby sees the same writes). An object already
// slimmed carries no managed fields and shows nothing.
func (c *Controller) noticeForeign(obj any) {
	if !c.leading.Load() {
		return
	}
	var (
		prev, cur metav1.Object
		kind      string
	)
	switch o := obj.(type) {
	case *v1.PersistentVolumeClaim:
		if isSlim(&o.ObjectMeta) {
			return
		}
		if p, ok := c.claims.Get(o.Namespace, o.Name); ok {
			prev = p
		}
		cur, kind = o, "PersistentVolumeClaim"
	case *v1.PersistentVolume:
		if isSlim(&o.ObjectMeta) {
			return
		}
		if p, ok := c.volumes.Get(o.Name); ok {
			prev = p
		}
		cur, kind = o, "PersistentVolume"
	default:
		return
	}
	// The cached copy must be an older version of the same object: one of
	// the binder's own writes can be cached before its watch event comes.
	if prev == nil || prev.GetUID() != cur.GetUID() || !newer(cur.GetResourceVersion(), prev.GetResourceVersion()) {
		return
	}
	w, ok := ForeignBinderWrite(prev, cur, c.startedAt)
	if !ok {
		return
	}
	c.metrics.observeForeign(kind, w.Manager)
	c.handlerLog.Info("Another PV binder wrote this object", "kind", kind, "object", klog.KObj(cur),
		"manager", w.Manager, "fields", w.Fields.String(), "at", w.Time.Format(time.RFC3339))
	// The recorder takes its reference to obj before it returns.
	c.writer.Recorder.Event(obj.(runtime.Object), v1.EventTypeWarning, ReasonAnotherBinder, foreignMessage(w))
}

// foreignMessage is the AnotherBinder event's message.
func foreignMessage(w ForeignWrite) string {
	return fmt.Sprintf("%s wrote %s at %s, after tether's binder started: another PV binder runs beside tether's; "+
		"turn off kube-controller-manager's persistentvolume-binder-controller (docs/binder.md#another-binder)",
		w.Manager, w.Fields, w.Time.UTC().Format(time.RFC3339))
}
