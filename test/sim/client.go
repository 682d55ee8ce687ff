package sim

import (
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// newClient is a fake clientset whose every call goes to the simulated
// API server through a reactor (client-go's own tracker has no
// resourceVersion conflicts and no finalizers), so tether's code talks to
// a kubernetes.Interface as in production. who names the component, for
// the fault plan and the trace.
func (w *World) newClient(who string) kubernetes.Interface {
	return w.newClientOf(func() string { return who }, current)
}

// newClientOf is newClient for a process of a release (releases.go) whose
// name may change (a standby binder that comes to lead).
func (w *World) newClientOf(name func() string, rel release) kubernetes.Interface {
	return w.newClientAs(name, nil, rel)
}

// newClientAs is newClientOf for a provisioner process, whose writes are
// told apart (caller) for the check of refused.go.
func (w *World) newClientAs(name func() string, caller *provProc, rel release) kubernetes.Interface {
	cs := &fake.Clientset{}
	cs.AddReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	cs.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		prev := w.caller
		w.caller = caller
		obj, err := w.react(name(), rel, action)
		w.caller = prev
		return true, obj, err
	})
	return cs
}

// react serves one call of a process of release rel. A write may fail
// before it is applied, or after (the caller sees an error for a write
// that happened), when faults are on.
func (w *World) react(who string, rel release, action k8stesting.Action) (runtime.Object, error) {
	a := w.api
	res := action.GetResource().Resource
	ns := action.GetNamespace()
	verb := action.GetVerb()
	if res == "events" {
		return nil, nil
	}
	write := verb == "create" || verb == "update" || verb == "delete" || verb == "patch"
	if verb == "create" && res == rVolumes {
		if err := w.refusePV(who, action); err != nil {
			return nil, err
		}
	}
	fault := faultNone
	if write {
		fault = w.apiFault(who, verb, res)
		if fault == faultBefore {
			w.tracef("  api fault before %s %s %s (%s)", verb, res, nameOf(action), who)
			return nil, apierrors.NewInternalError(fmt.Errorf("simulated fault before the write"))
		}
	}
	if write && who == "binder" {
		w.checkBinderWrite(verb, res, ns, action)
	}
	if write && who == standbyRole {
		w.violate("the binder standing by wrote: %s %s %s", verb, res, nameOf(action))
	}
	var before *v1.PersistentVolumeClaim
	if res == rClaims && (verb == "update" || verb == "patch") {
		before, _ = a.peek(rClaims, objKey(ns, nameOf(action))).(*v1.PersistentVolumeClaim)
	}
	var beforeSnap *snapv1.VolumeSnapshot
	if res == rSnapshots && (verb == "update" || verb == "patch") {
		beforeSnap, _ = a.peek(rSnapshots, objKey(ns, nameOf(action))).(*snapv1.VolumeSnapshot)
	}
	obj, err := w.serve(a, res, ns, verb, action, rel)
	if err == nil && beforeSnap != nil {
		w.noteSnapshotWrite(who, beforeSnap, obj)
	}
	if after, ok := obj.(*v1.PersistentVolumeClaim); ok && before != nil && err == nil {
		w.noteRecordWrite(before, after, fault != faultAfter)
	}
	if verb == "get" && res == rNodes {
		if n, ok := obj.(*v1.Node); ok && err == nil {
			w.observe(who, n.Name, n)
		} else if apierrors.IsNotFound(err) {
			w.observe(who, action.(k8stesting.GetAction).GetName(), nil)
		}
	}
	if write && err == nil {
		w.tracef("  api %s %s %s (%s)", verb, res, nameOf(action), who)
	}
	if pv, ok := obj.(*v1.PersistentVolume); ok && verb == "create" && err == nil {
		w.checkSavedPV(who, pv)
	}
	if fault == faultAfter && err == nil {
		w.tracef("  api fault after %s %s %s (%s)", verb, res, nameOf(action), who)
		return nil, apierrors.NewServerTimeout(a.gr(res), verb, 1)
	}
	if obj != nil && err == nil {
		// The stored object is not the caller's: a.Get, a.Update and the
		// lists return copies.
		rel.view(obj)
		rel.viewList(obj)
	}
	return obj, err
}

func nameOf(action k8stesting.Action) string {
	switch act := action.(type) {
	case interface{ GetName() string }: // get, delete, patch
		return act.GetName()
	case k8stesting.CreateAction:
		if m, ok := act.GetObject().(interface{ GetName() string }); ok {
			return m.GetName()
		}
	}
	return ""
}

// serve applies one call to the API; a claim written by a process of the
// previous release keeps the stored format (release.write).
func (w *World) serve(a *API, res, ns, verb string, action k8stesting.Action, rel release) (runtime.Object, error) {
	switch verb {
	case "get":
		name := action.(k8stesting.GetAction).GetName()
		o := a.Get(res, ns, name)
		if o == nil {
			return nil, apierrors.NewNotFound(a.gr(res), name)
		}
		return o, nil
	case "list":
		switch res {
		case rVolumes:
			out := &v1.PersistentVolumeList{}
			for _, pv := range a.volumes() {
				out.Items = append(out.Items, *pv.DeepCopy())
			}
			return out, nil
		case rClaims:
			out := &v1.PersistentVolumeClaimList{}
			for _, c := range a.claims() {
				if ns == "" || c.Namespace == ns {
					out.Items = append(out.Items, *c.DeepCopy())
				}
			}
			return out, nil
		}
	case "create":
		return a.Create(action.(k8stesting.CreateAction).GetObject())
	case "update":
		obj := action.(k8stesting.UpdateAction).GetObject()
		if rel == previous && res == rClaims {
			if stored := a.peek(res, objKey(ns, nameOf(action))); stored != nil {
				obj = rel.write(stored, obj.DeepCopyObject())
			}
		}
		return a.Update(obj, action.GetSubresource() == "status")
	case "delete":
		act := action.(k8stesting.DeleteAction)
		return nil, a.Delete(res, ns, act.GetName(), act.GetDeleteOptions().Preconditions)
	case "patch":
		act := action.(k8stesting.PatchAction)
		apply := mergePatch
		switch act.GetPatchType() {
		case types.MergePatchType:
		case types.JSONPatchType:
			apply = jsonPatch
		default:
			return nil, apierrors.NewBadRequest("sim: only merge and JSON patches")
		}
		cur := a.Get(res, ns, act.GetName())
		if cur == nil {
			return nil, apierrors.NewNotFound(a.gr(res), act.GetName())
		}
		next, err := apply(cur, act.GetPatch())
		if err != nil {
			// As the API server: a patch that does not apply (a failed
			// test) is refused, and changes nothing.
			return nil, apierrors.NewInvalid(schema.GroupKind{Group: a.gr(res).Group, Kind: a.gr(res).Resource}, act.GetName(), nil)
		}
		return a.Update(rel.write(cur, next), action.GetSubresource() == "status")
	}
	return nil, apierrors.NewMethodNotSupported(a.gr(res), verb)
}

// mergePatch applies a JSON merge patch (RFC 7386) to an object.
func mergePatch(obj runtime.Object, patch []byte) (runtime.Object, error) {
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var target, p any
	if err := json.Unmarshal(doc, &target); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	merged, err := json.Marshal(mergeValue(target, p))
	if err != nil {
		return nil, err
	}
	out := newOfKind(obj)
	return out, json.Unmarshal(merged, out)
}

// jsonPatch applies a JSON patch (RFC 6902) to an object, tests included.
func jsonPatch(obj runtime.Object, patch []byte) (runtime.Object, error) {
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	patched, err := p.Apply(doc)
	if err != nil {
		return nil, err
	}
	out := newOfKind(obj)
	return out, json.Unmarshal(patched, out)
}

func mergeValue(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
		} else {
			tm[k] = mergeValue(tm[k], v)
		}
	}
	return tm
}

func newOfKind(obj runtime.Object) runtime.Object {
	switch obj.(type) {
	case *v1.PersistentVolume:
		return &v1.PersistentVolume{}
	case *v1.PersistentVolumeClaim:
		return &v1.PersistentVolumeClaim{}
	case *storagev1.StorageClass:
		return &storagev1.StorageClass{}
	case *snapv1.VolumeSnapshot:
		return &snapv1.VolumeSnapshot{}
	case *snapv1.VolumeSnapshotContent:
		return &snapv1.VolumeSnapshotContent{}
	}
	panic(fmt.Sprintf("sim: no patch for %T", obj))
}
