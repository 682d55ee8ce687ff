package binder

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The binder's writes of a cut object (slim.go: its cache copy lacks
// fields the server has) are JSON merge patches (RFC 7386) of what it
// changed, never full updates, which would erase those fields on the
// server; so are all its writes while the API server is newer than its
// API types (Options.PatchAll), whose fields the binder's copies lack
// too (a claim's status.healthStatus of Kubernetes 1.37, unknown to
// client-go v0.36). A patch carries the resourceVersion the change was
// decided on, so the API server refuses it with a conflict when the object
// changed since, as it refuses an update. Other objects are written whole,
// by update, which costs the API server less.

// MergePatch returns the merge patch that turns the JSON object old into
// new: each member that new changes or adds, with its new value (objects
// compared member by member, anything else as a whole: a list is replaced
// entire), and null for each member new drops. It is empty when they are
// equal.
func MergePatch(old, new map[string]any) map[string]any {
	out := map[string]any{}
	for k, ov := range old {
		nv, ok := new[k]
		if !ok {
			out[k] = nil
			continue
		}
		om, oldObject := ov.(map[string]any)
		nm, newObject := nv.(map[string]any)
		if oldObject && newObject {
			if d := MergePatch(om, nm); len(d) > 0 {
				out[k] = d
			}
			continue
		}
		if !reflect.DeepEqual(ov, nv) {
			out[k] = nv
		}
	}
	for k, nv := range new {
		if _, ok := old[k]; !ok {
			out[k] = nv
		}
	}
	return out
}

// writePatch is the patch of a write that changes old into new: of the
// status subresource (status) only the status, otherwise all but the
// status; with old's resourceVersion as the precondition. It is nil when
// the write would change nothing.
func writePatch(old, new any, resourceVersion string, status bool) ([]byte, error) {
	o, err := jsonObject(old)
	if err != nil {
		return nil, err
	}
	n, err := jsonObject(new)
	if err != nil {
		return nil, err
	}
	p := MergePatch(o, n)
	if status {
		p = map[string]any{"status": p["status"]}
		if p["status"] == nil {
			return nil, nil
		}
	} else {
		delete(p, "status")
		if meta, ok := p["metadata"].(map[string]any); ok {
			// The version is the precondition below, not a change.
			delete(meta, "resourceVersion")
			if len(meta) == 0 {
				delete(p, "metadata")
			}
		}
		if len(p) == 0 {
			return nil, nil
		}
	}
	if resourceVersion != "" {
		p["metadata"] = mergeMeta(p["metadata"], resourceVersion)
	}
	return json.Marshal(p)
}

func mergeMeta(meta any, resourceVersion string) map[string]any {
	m, _ := meta.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	m["resourceVersion"] = resourceVersion
	return m
}

func jsonObject(obj any) (map[string]any, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// writeClaim writes the change from old (a cached claim) to new (its
// modified copy, which it may change), of the claim or of its status, and
// takes the answer into the claim store: by update, or by merge patch when
// old is cut or every write patches (a patch of no change writes nothing
// and returns old).
func (w *Writer) writeClaim(ctx context.Context, old, new *v1.PersistentVolumeClaim, status bool) (*v1.PersistentVolumeClaim, error) {
	claims := w.Client.CoreV1().PersistentVolumeClaims(old.Namespace)
	var (
		out *v1.PersistentVolumeClaim
		err error
	)
	switch {
	case !isCut(&old.ObjectMeta) && !w.patchesAll():
		new.ManagedFields = nil // the server keeps its own
		if status {
			out, err = claims.UpdateStatus(ctx, new, metav1.UpdateOptions{})
		} else {
			out, err = claims.Update(ctx, new, metav1.UpdateOptions{})
		}
	default:
		var data []byte
		if data, err = writePatch(old, new, old.ResourceVersion, status); err != nil {
			return nil, fmt.Errorf("patch of claim %s/%s: %w", old.Namespace, old.Name, err)
		}
		if data == nil {
			return old, nil
		}
		if status {
			out, err = claims.Patch(ctx, old.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
		} else {
			out, err = claims.Patch(ctx, old.Name, types.MergePatchType, data, metav1.PatchOptions{})
		}
	}
	if err != nil {
		return nil, err
	}
	return w.Claims.Returned(out), nil
}

// writeVolume is writeClaim for a PV, taken into the volume index.
func (w *Writer) writeVolume(ctx context.Context, old, new *v1.PersistentVolume, status bool) (*v1.PersistentVolume, error) {
	volumes := w.Client.CoreV1().PersistentVolumes()
	var (
		out *v1.PersistentVolume
		err error
	)
	switch {
	case !isCut(&old.ObjectMeta) && !w.patchesAll():
		new.ManagedFields = nil
		if status {
			out, err = volumes.UpdateStatus(ctx, new, metav1.UpdateOptions{})
		} else {
			out, err = volumes.Update(ctx, new, metav1.UpdateOptions{})
		}
	default:
		var data []byte
		if data, err = writePatch(old, new, old.ResourceVersion, status); err != nil {
			return nil, fmt.Errorf("patch of PV %s: %w", old.Name, err)
		}
		if data == nil {
			return old, nil
		}
		if status {
			out, err = volumes.Patch(ctx, old.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
		} else {
			out, err = volumes.Patch(ctx, old.Name, types.MergePatchType, data, metav1.PatchOptions{})
		}
	}
	if err != nil {
		return nil, err
	}
	return w.Volumes.Returned(out), nil
}

// patchesAll reports whether every write must be a patch now.
func (w *Writer) patchesAll() bool {
	return w.patchAll != nil && w.patchAll()
}
