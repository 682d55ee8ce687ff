package binder

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
)

func TestMergePatch(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{"equal", `{"a":1,"b":{"c":"x"}}`, `{"a":1,"b":{"c":"x"}}`, `{}`},
		{"a member changes", `{"a":1,"b":2}`, `{"a":1,"b":3}`, `{"b":3}`},
		{"a member is added", `{"a":1}`, `{"a":1,"b":"x"}`, `{"b":"x"}`},
		{"a member goes", `{"a":1,"b":2}`, `{"a":1}`, `{"b":null}`},
		{"objects member by member", `{"m":{"x":"1","y":"2","z":"3"}}`, `{"m":{"x":"1","y":"9","w":"4"}}`,
			`{"m":{"y":"9","w":"4","z":null}}`},
		{"an object that goes", `{"m":{"x":"1"}}`, `{}`, `{"m":null}`},
		{"an object that comes", `{}`, `{"m":{"x":"1"}}`, `{"m":{"x":"1"}}`},
		{"a list whole", `{"l":["a","b"]}`, `{"l":["a"]}`, `{"l":["a"]}`},
		{"a list unchanged", `{"l":["a","b"]}`, `{"l":["a","b"]}`, `{}`},
		{"an object becomes a value", `{"m":{"x":"1"}}`, `{"m":"s"}`, `{"m":"s"}`},
		{"deep", `{"spec":{"claimRef":{"name":"c","uid":"1"}}}`, `{"spec":{"claimRef":{"name":"c"}}}`,
			`{"spec":{"claimRef":{"uid":null}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var old, new, want map[string]any
			for _, p := range []struct {
				s   string
				dst *map[string]any
			}{{tt.old, &old}, {tt.new, &new}, {tt.want, &want}} {
				if err := json.Unmarshal([]byte(p.s), p.dst); err != nil {
					t.Fatal(err)
				}
			}
			got := MergePatch(old, new)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("MergePatch = %v, want %v", got, want)
			}
			// Applied to old, the patch gives new (RFC 7386).
			if applied := applyMergePatch(old, got); !reflect.DeepEqual(applied, new) {
				t.Errorf("old patched = %v, want %v", applied, new)
			}
		})
	}
}

// The patch of a write: status alone for the status subresource, all but
// the status otherwise, with the version as precondition; none for no
// change.
func TestWritePatch(t *testing.T) {
	old := newPVC("c", "1Gi")
	old.ResourceVersion = "7"
	changed := old.DeepCopy()
	changed.Spec.VolumeName = "pv"
	changed.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
	changed.Status.Phase = v1.ClaimBound
	tests := []struct {
		name   string
		new    *v1.PersistentVolumeClaim
		status bool
		want   string
	}{
		{"spec and metadata", changed, false,
			`{"metadata":{"annotations":{"pv.kubernetes.io/bind-completed":"yes"},"resourceVersion":"7"},"spec":{"volumeName":"pv"}}`},
		{"status", changed, true, `{"metadata":{"resourceVersion":"7"},"status":{"phase":"Bound"}}`},
		{"no change", old.DeepCopy(), false, ``},
		{"no change of status", old.DeepCopy(), true, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := writePatch(old, tt.new, old.ResourceVersion, tt.status)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("writePatch = %s, want %s", got, tt.want)
			}
		})
	}
}

// applyMergePatch applies a merge patch (RFC 7386) to a JSON object, for
// the tests: the fake clientset's reactor below, and the check that
// MergePatch's patches give back the new object.
func applyMergePatch(doc, patch map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range doc {
		out[k] = v
	}
	for k, pv := range patch {
		if pv == nil {
			delete(out, k)
			continue
		}
		pm, ok := pv.(map[string]any)
		if !ok {
			out[k] = pv
			continue
		}
		dm, _ := out[k].(map[string]any)
		out[k] = applyMergePatch(dm, pm)
	}
	return out
}

// versionedPatches serves the binder's merge patches on a fake clientset
// as an API server does, which the fake's own tracker does not: a patch
// whose resourceVersion is not the object's fails with a conflict, and
// each patch moves the version on (from 100 up, shared with bumpVersion's
// count only in spirit: the two never serve the same test's objects).
func versionedPatches(tracker k8stesting.ObjectTracker) k8stesting.ReactionFunc {
	var mu sync.Mutex
	next := 100
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		p, ok := a.(k8stesting.PatchAction)
		if !ok || p.GetPatchType() != types.MergePatchType {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		cur, err := tracker.Get(p.GetResource(), p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		var doc, patch map[string]any
		raw, _ := json.Marshal(cur)
		if err := json.Unmarshal(raw, &doc); err != nil {
			return true, nil, err
		}
		if err := json.Unmarshal(p.GetPatch(), &patch); err != nil {
			return true, nil, err
		}
		m, _ := meta.Accessor(cur)
		if pm, ok := patch["metadata"].(map[string]any); ok {
			if rv, ok := pm["resourceVersion"].(string); ok && rv != m.GetResourceVersion() {
				return true, nil, apierrors.NewConflict(p.GetResource().GroupResource(), p.GetName(),
					errors.New("the object has been modified"))
			}
		}
		merged, _ := json.Marshal(applyMergePatch(doc, patch))
		out := reflect.New(reflect.TypeOf(cur).Elem()).Interface().(runtime.Object)
		if err := json.Unmarshal(merged, out); err != nil {
			return true, nil, err
		}
		next++
		om, _ := meta.Accessor(out)
		om.SetResourceVersion(strconv.Itoa(next))
		if err := tracker.Update(p.GetResource(), out, p.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, out, nil
	}
}
