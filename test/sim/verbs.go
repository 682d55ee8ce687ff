package sim

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// The world, checked against the API's own fields (issue 49). writers.go
// is written by hand; what it lacks cannot be seen in it. So the verbs
// anyone may perform on what the binder and the provisioner read are
// listed here from the API types themselves, by reflection, and every one
// of them must be a row of the world's table (verbs_table.go): a move of
// writers.go that performs it, or a one-line reason why it cannot change
// a decision of the binder or the provisioner, or a gap said as one
// ("GAP: ..."). TestWorldCoversTheAPI compares the two both ways.
//
// A verb is one of:
//   - "create";
//   - "delete" for a kind without status.phase, "delete at <phase>" for
//     each phase of one that has it;
//   - "update metadata.labels", "update metadata.annotations",
//     "update metadata.finalizers";
//   - "update spec.<field>" for each top-level field of the spec, by its
//     json name (inline structs flattened: a PV's spec.csi, spec.nfs...);
//     for a kind without spec (StorageClass, Secret,
//     VolumeAttributesClass), "update <field>" for each top-level field
//     but kind, apiVersion, metadata and status;
//   - "update status.<field>", only where a party's row names it: status
//     is the API server's or tether's own, but where another controller
//     writes a field tether reads (a Node's conditions, a snapshot's bound
//     content), and the path must name a field of the type.
//
// Depth: one level under spec. A field's sub-fields (a PV's
// spec.csi.volumeHandle, a claim's spec.resources.requests) are the row
// of the field; an annotation's keys are the row of metadata.annotations.

// apiKind is a kind the binder or the provisioner reads, as its API type
// defines it.
type apiKind struct {
	name string
	typ  reflect.Type
	// phases are its status.phase values. Reflection cannot list a
	// package's constants: each is named here from the API package (see
	// phasesOf), so that the compiler checks it exists; a phase the API
	// adds later is not seen until it is added here.
	phases []string
}

func phasesOf[T ~string](ps ...T) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

// apiKinds are the kinds the binder or the provisioner reads: core/v1,
// storage/v1 (VolumeAttributesClass is served as storage/v1 by the
// k8s.io/api of go.mod, v0.36.3, and read so by the provisioner), and the
// external-snapshotter's client/v8 snapshot.storage.k8s.io/v1 types,
// which the provisioner reads.
var apiKinds = []apiKind{
	{"PersistentVolume", reflect.TypeFor[v1.PersistentVolume](),
		phasesOf(v1.VolumePending, v1.VolumeAvailable, v1.VolumeBound, v1.VolumeReleased, v1.VolumeFailed)},
	{"PersistentVolumeClaim", reflect.TypeFor[v1.PersistentVolumeClaim](),
		phasesOf(v1.ClaimPending, v1.ClaimBound, v1.ClaimLost)},
	{"StorageClass", reflect.TypeFor[storagev1.StorageClass](), nil},
	{"Node", reflect.TypeFor[v1.Node](), nil},
	{"CSINode", reflect.TypeFor[storagev1.CSINode](), nil},
	{"VolumeAttachment", reflect.TypeFor[storagev1.VolumeAttachment](), nil},
	{"VolumeAttributesClass", reflect.TypeFor[storagev1.VolumeAttributesClass](), nil},
	{"VolumeSnapshot", reflect.TypeFor[snapv1.VolumeSnapshot](), nil},
	{"VolumeSnapshotContent", reflect.TypeFor[snapv1.VolumeSnapshotContent](), nil},
	{"Namespace", reflect.TypeFor[v1.Namespace](), phasesOf(v1.NamespaceActive, v1.NamespaceTerminating)},
	{"Secret", reflect.TypeFor[v1.Secret](), nil},
}

// kindVerbs lists the verbs of a kind from its type (see the list above;
// status fields come from the parties' rows, not from here).
func kindVerbs(k apiKind) []string {
	out := []string{"create"}
	if len(k.phases) == 0 {
		out = append(out, "delete")
	}
	for _, p := range k.phases {
		out = append(out, "delete at "+p)
	}
	out = append(out, "update metadata.labels", "update metadata.annotations", "update metadata.finalizers")
	if spec, ok := k.typ.FieldByName("Spec"); ok {
		for _, f := range jsonFields(spec.Type) {
			out = append(out, "update spec."+f)
		}
		return out
	}
	for _, f := range jsonFields(k.typ) {
		if f != "kind" && f != "apiVersion" && f != "metadata" && f != "status" {
			out = append(out, "update "+f)
		}
	}
	return out
}

// jsonFields are the json names of a struct's fields, inline (embedded,
// unnamed) structs flattened, fields without a name ("-") left out.
func jsonFields(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "" && f.Anonymous:
			out = append(out, jsonFields(f.Type)...)
		case name != "" && name != "-":
			out = append(out, name)
		}
	}
	return out
}

// hasPath says whether a dotted path of json names ("status.conditions")
// names a field of t, through pointers and inline structs.
func hasPath(t reflect.Type, path string) bool {
	for _, seg := range strings.Split(path, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return false
		}
		f, ok := jsonField(t, seg)
		if !ok {
			return false
		}
		t = f.Type
	}
	return true
}

func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		n, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if n == name {
			return f, true
		}
		if n == "" && f.Anonymous {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if g, ok := jsonField(ft, name); ok {
					return g, true
				}
			}
		}
	}
	return reflect.StructField{}, false
}

// writes is one row of who may write a kind, from the threat model
// (docs/design.md, "Threat model: who may write what") and the
// controllers of a cluster that write what tether reads.
type writes struct {
	party, kind string
	// all: the party may perform every verb kindVerbs yields for the
	// kind.
	all bool
	// verbs are the party's verbs besides (or, without all, instead of)
	// those: each a verb kindVerbs yields, or "update status.<path>" of a
	// field of the type.
	verbs []string
	why   string
}

// whoWrites is the threat model as data: kind, party, and why.
var whoWrites = []writes{
	{"tenant", "PersistentVolumeClaim", true, nil, "a namespace user (edit role): claims of its namespace, spec at creation, every annotation and finalizer"},
	{"scheduler", "PersistentVolumeClaim", false, []string{"update metadata.annotations"}, "kube-scheduler: volume.kubernetes.io/selected-node"},
	{"statefulset", "PersistentVolumeClaim", false, []string{"create"}, "the StatefulSet controller: its template's claims, again under a released claim's name"},
	{"tenant", "VolumeSnapshot", true, nil, "a namespace user: VolumeSnapshots of its namespace"},
	{"snapshot-controller", "VolumeSnapshot", false, []string{"update metadata.finalizers", "update status.boundVolumeSnapshotContentName", "update status.readyToUse", "update status.restoreSize"}, "the snapshot-controller: its finalizers, and the status a restore reads"},
	{"tenant", "Secret", true, nil, "a namespace user: Secrets of its namespace (a class's provisioner secret templated on it)"},
	{"tenant", "Namespace", false, []string{"create", "delete at Active", "delete at Terminating"}, "a namespace user allowed to make and delete namespaces"},
	{"admin", "Namespace", false, []string{"update metadata.labels", "update metadata.annotations", "update metadata.finalizers", "update spec.finalizers"}, "the cluster's admin, and the namespace controller for spec.finalizers"},
	{"admin", "PersistentVolume", true, nil, "the cluster's admin: what a PV says tracks a volume"},
	{"admission webhook", "PersistentVolume", false, []string{"create"}, "a webhook or an outage that refuses a PV's create (the library's save)"},
	{"admin", "StorageClass", true, nil, "the cluster's admin: a class's parameters and reclaim policy"},
	{"admin", "Node", true, nil, "the cluster's admin"},
	{"node lifecycle", "Node", false, []string{"update spec.taints", "update status.conditions"}, "the node lifecycle controller: a node NotReady, its not-ready and unreachable taints"},
	{"kubelet", "Node", false, []string{"create", "update metadata.labels", "update status.conditions"}, "a node's kubelet: it registers its node, with its labels, and reports its conditions"},
	{"autoscaler", "Node", false, []string{"create", "delete"}, "a cluster autoscaler: nodes made and removed"},
	{"admin", "CSINode", true, nil, "the cluster's admin"},
	{"kubelet", "CSINode", false, []string{"create", "update spec.drivers"}, "a node's kubelet: the drivers registered on it"},
	{"admin", "VolumeAttachment", true, nil, "the cluster's admin"},
	{"attach-detach controller", "VolumeAttachment", false, []string{"create", "delete"}, "kube-controller-manager's attach-detach controller: a pod's volume attached, detached"},
	{"external-attacher", "VolumeAttachment", false, []string{"update metadata.finalizers", "update status.attached"}, "the driver's attacher: its finalizer and the attach's outcome"},
	{"admin", "VolumeAttributesClass", true, nil, "the cluster's admin"},
	{"admin", "VolumeSnapshotContent", true, []string{"update status.snapshotHandle"}, "the cluster's admin: a content's snapshot handle"},
	{"snapshot-controller", "VolumeSnapshotContent", false, []string{"create", "delete", "update metadata.finalizers", "update spec.volumeSnapshotRef", "update status.snapshotHandle"}, "the snapshot-controller and csi-snapshotter: a snapshot's content, bound both ways, its handle"},
}

// verbKey is one verb a party may perform on a kind.
type verbKey struct{ party, kind, verb string }

func (k verbKey) String() string { return k.party + " " + k.kind + " " + k.verb }

// enumerate lists every verb every party of who may perform, from the
// types of kinds, and the rows of who that are wrong: a kind it does not
// know, a verb its type does not yield, a duplicate. Pure.
func enumerate(kinds []apiKind, who []writes) (verbs []verbKey, problems []string) {
	byName := map[string]apiKind{}
	for _, k := range kinds {
		byName[k.name] = k
	}
	seen := map[verbKey]bool{}
	add := func(k verbKey) {
		if seen[k] {
			problems = append(problems, "whoWrites: "+k.String()+" twice")
			return
		}
		seen[k] = true
		verbs = append(verbs, k)
	}
	for _, w := range who {
		k, ok := byName[w.kind]
		if !ok {
			problems = append(problems, fmt.Sprintf("whoWrites: %s writes %s, a kind apiKinds does not list", w.party, w.kind))
			continue
		}
		own := kindVerbs(k)
		if w.all {
			for _, v := range own {
				add(verbKey{w.party, w.kind, v})
			}
		}
		for _, v := range w.verbs {
			path, status := strings.CutPrefix(v, "update ")
			if slices.Contains(own, v) || (status && strings.HasPrefix(path, "status.") && hasPath(k.typ, path)) {
				add(verbKey{w.party, w.kind, v})
				continue
			}
			problems = append(problems, fmt.Sprintf("whoWrites: %s %s %q is no verb of its type", w.party, w.kind, v))
		}
	}
	return verbs, problems
}

// compareTable checks the world's table and its gaps against the verbs
// enumerated, both ways, and returns what is wrong, one line each: a verb
// without a row; a row of no verb (a stale row, or a party, kind or field
// the API or the threat model no longer has); a verb of two rows; a row
// that names neither a move nor a reason; a move that is not one of moves
// (writers.go's, and the pending ones); a reason that says "GAP:" in the
// table, or a gap that does not, or names a move. Pure.
func compareTable(verbs []verbKey, table, gaps []verbRow, moves map[string]bool) []string {
	var problems []string
	want := map[verbKey]bool{}
	for _, k := range verbs {
		want[k] = true
	}
	rows := map[verbKey]bool{}
	check := func(r verbRow, gap bool) {
		k := verbKey{r.party, r.kind, r.verb}
		switch {
		case rows[k]:
			problems = append(problems, k.String()+": two rows")
		case !want[k]:
			problems = append(problems, k.String()+": a row of no verb the API types and whoWrites yield (stale)")
		}
		rows[k] = true
		isGap := strings.HasPrefix(r.why, "GAP:")
		switch {
		case gap && (!isGap || len(r.moves) > 0):
			problems = append(problems, k.String()+`: a gap has no move and its reason begins "GAP:"`)
		case !gap && isGap:
			problems = append(problems, k.String()+": a GAP belongs in worldGaps")
		case !gap && len(r.moves) == 0 && r.why == "":
			problems = append(problems, k.String()+": neither a move nor a reason")
		case !gap && len(r.moves) > 0 && r.why != "":
			problems = append(problems, k.String()+": a move or a reason, not both")
		}
		for _, m := range r.moves {
			if !moves[m] {
				problems = append(problems, fmt.Sprintf("%s: move %q is no row of writers.go", k, m))
			}
		}
	}
	for _, r := range table {
		check(r, false)
	}
	for _, r := range gaps {
		check(r, true)
	}
	for _, k := range verbs {
		if !rows[k] {
			problems = append(problems, k.String()+": no row (a move of writers.go, or why it cannot change a decision)")
		}
	}
	return problems
}
