package binder

import (
	"encoding/json"
	"math/bits"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// Another PV binder (kube-controller-manager's persistentvolume-binder-
// controller left on) writes the same fields of the same claims and PVs as
// this binder. The API server says who last changed each field: a write's
// metadata.managedFields entry names its field manager (the client's user
// agent up to its first slash: "kube-controller-manager" for every KCM
// controller; tether's binder is "tether-binder", in every version), the
// fields it last changed, and when. A field changes owner only when its
// value changes, so a binding field whose value changed since the binder's
// last sight of the object, and which a foreign binder's entry now owns,
// was written by that binder since. The entry's time must be after the
// binder started too: a claim or PV that KCM bound before the switch keeps
// KCM's old entries, which are not news.
//
// The cache keeps no managed fields (slim.go), so the decision is taken
// where the whole object is seen, in the informers' transform, against the
// slim copy cached before it.

// ReasonAnotherBinder is the reason of the Warning event on a claim or PV
// that another PV binder wrote.
const ReasonAnotherBinder = "AnotherBinder"

// ForeignBinders are the field managers of the PV binders that are not
// tether's. kube-controller-manager's other controllers (claim and volume
// protection, expansion, StatefulSets' claims) share its name, but none of
// them changes a binding field.
var ForeignBinders = []string{"kube-controller-manager"}

// BindingFields is a set of the fields a binder writes.
type BindingFields uint16

// The binding fields of a claim or a PV.
const (
	FieldVolumeName BindingFields = 1 << iota
	FieldClaimRef
	FieldPhase
	FieldBindCompleted
	FieldBoundByController
	FieldProvisionedBy
	FieldStorageProvisioner
	FieldBetaStorageProvisioner
)

// bindingFieldNames name each field, in the order of its bit.
var bindingFieldNames = [...]struct {
	field BindingFields
	name  string
}{
	{FieldVolumeName, "spec.volumeName"},
	{FieldClaimRef, "spec.claimRef"},
	{FieldPhase, "status.phase"},
	{FieldBindCompleted, "annotation " + storagehelpers.AnnBindCompleted},
	{FieldBoundByController, "annotation " + storagehelpers.AnnBoundByController},
	{FieldProvisionedBy, "annotation " + storagehelpers.AnnDynamicallyProvisioned},
	{FieldStorageProvisioner, "annotation " + storagehelpers.AnnStorageProvisioner},
	{FieldBetaStorageProvisioner, "annotation " + storagehelpers.AnnBetaStorageProvisioner},
}

// bindingAnnotations are the binding annotations, by field.
var bindingAnnotations = map[BindingFields]string{
	FieldBindCompleted:          storagehelpers.AnnBindCompleted,
	FieldBoundByController:      storagehelpers.AnnBoundByController,
	FieldProvisionedBy:          storagehelpers.AnnDynamicallyProvisioned,
	FieldStorageProvisioner:     storagehelpers.AnnStorageProvisioner,
	FieldBetaStorageProvisioner: storagehelpers.AnnBetaStorageProvisioner,
}

// String names the fields, comma-separated.
func (f BindingFields) String() string {
	var names []string
	for _, n := range bindingFieldNames {
		if f&n.field != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ", ")
}

// ForeignWrite is a write of another binder seen on an object.
type ForeignWrite struct {
	// Manager is the writer's field manager.
	Manager string
	// Fields are the binding fields it changed.
	Fields BindingFields
	// Time is its managed-fields entry's time.
	Time time.Time
}

// ForeignBinderWrite decides whether obj, a claim or a PV as the API server
// sent it (managed fields included), shows a write of another binder since
// prev, the binder's last copy of it (nil for none: an object first seen
// shows nothing, since no change can be told), after since (the binder's
// start). It does when a binding field differs between prev and obj, and
// an entry of obj's managed fields of a manager in ForeignBinders, of a
// time not before since (to the second, the entries' precision), owns that
// field. prev may be slim: the binding fields are all kept.
func ForeignBinderWrite(prev, obj metav1.Object, since time.Time) (ForeignWrite, bool) {
	if prev == nil || obj == nil {
		return ForeignWrite{}, false
	}
	changed := bindingFieldsOf(prev).diff(bindingFieldsOf(obj))
	if changed == 0 {
		return ForeignWrite{}, false
	}
	since = since.Truncate(time.Second)
	var out ForeignWrite
	for _, e := range obj.GetManagedFields() {
		if !slices.Contains(ForeignBinders, e.Manager) || e.Time == nil || e.Time.Time.Before(since) {
			continue
		}
		owned := ownedBindingFields(e.FieldsV1) & changed
		if owned == 0 {
			continue
		}
		out.Manager = e.Manager
		out.Fields |= owned
		if e.Time.Time.After(out.Time) {
			out.Time = e.Time.Time
		}
	}
	return out, out.Fields != 0
}

// bindingValues are the values of an object's binding fields, in the
// order of bindingFieldNames (an annotation's with "=" before it when set,
// so that set-and-empty differs from absent).
type bindingValues [len(bindingFieldNames)]string

func (v *bindingValues) set(f BindingFields, value string) {
	v[bits.TrailingZeros16(uint16(f))] = value
}

func (a bindingValues) diff(b bindingValues) BindingFields {
	var out BindingFields
	for i, n := range bindingFieldNames {
		if a[i] != b[i] {
			out |= n.field
		}
	}
	return out
}

func bindingFieldsOf(obj metav1.Object) bindingValues {
	var out bindingValues
	ann := obj.GetAnnotations()
	for f, key := range bindingAnnotations {
		if v, ok := ann[key]; ok {
			out.set(f, "="+v)
		}
	}
	switch o := obj.(type) {
	case *v1.PersistentVolumeClaim:
		out.set(FieldVolumeName, o.Spec.VolumeName)
		out.set(FieldPhase, string(o.Status.Phase))
	case *v1.PersistentVolume:
		if r := o.Spec.ClaimRef; r != nil {
			out.set(FieldClaimRef, r.Namespace+"/"+r.Name+"/"+string(r.UID))
		}
		out.set(FieldPhase, string(o.Status.Phase))
	}
	return out
}

// ownedBindingFields are the binding fields a managed-fields entry's field
// set names (the FieldsV1 JSON form: {"f:spec":{"f:volumeName":{}}}).
func ownedBindingFields(f *metav1.FieldsV1) BindingFields {
	if f == nil {
		return 0
	}
	var set map[string]map[string]json.RawMessage
	if json.Unmarshal(f.GetRawBytes(), &set) != nil {
		return 0
	}
	var out BindingFields
	if _, ok := set["f:spec"]["f:volumeName"]; ok {
		out |= FieldVolumeName
	}
	if _, ok := set["f:spec"]["f:claimRef"]; ok {
		out |= FieldClaimRef
	}
	if _, ok := set["f:status"]["f:phase"]; ok {
		out |= FieldPhase
	}
	if raw, ok := set["f:metadata"]["f:annotations"]; ok {
		var anns map[string]json.RawMessage
		if json.Unmarshal(raw, &anns) == nil {
			for field, key := range bindingAnnotations {
				if _, ok := anns["f:"+key]; ok {
					out |= field
				}
			}
		}
	}
	return out
}
