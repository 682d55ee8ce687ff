package sim

import (
	"fmt"
	"sort"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The resources the simulated API server holds.
const (
	rClaims     = "persistentvolumeclaims"
	rVolumes    = "persistentvolumes"
	rClasses    = "storageclasses"
	rNodes      = "nodes"
	rCSINodes   = "csinodes"
	rSecrets    = "secrets"
	rNamespaces = "namespaces"
	rVAs        = "volumeattachments"
	rVACs       = "volumeattributesclasses"
	rCSIDrivers = "csidrivers"
	rSnapshots  = "volumesnapshots"
	rContents   = "volumesnapshotcontents"
)

var namespaced = map[string]bool{rClaims: true, rSecrets: true, rSnapshots: true}

func groupOf(resource string) string {
	switch resource {
	case rClasses, rCSINodes, rVAs, rVACs, rCSIDrivers:
		return "storage.k8s.io"
	case rSnapshots, rContents:
		return snapv1.GroupName
	}
	return ""
}

func resourceOf(obj runtime.Object) string {
	switch obj.(type) {
	case *v1.PersistentVolumeClaim:
		return rClaims
	case *v1.PersistentVolume:
		return rVolumes
	case *storagev1.StorageClass:
		return rClasses
	case *v1.Node:
		return rNodes
	case *storagev1.CSINode:
		return rCSINodes
	case *v1.Secret:
		return rSecrets
	case *v1.Namespace:
		return rNamespaces
	case *storagev1.VolumeAttachment:
		return rVAs
	case *storagev1.VolumeAttributesClass:
		return rVACs
	case *storagev1.CSIDriver:
		return rCSIDrivers
	case *snapv1.VolumeSnapshot:
		return rSnapshots
	case *snapv1.VolumeSnapshotContent:
		return rContents
	}
	panic(fmt.Sprintf("sim: no resource for %T", obj))
}

func objKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// API is the simulated API server: one store per resource, a global
// resourceVersion, optimistic concurrency on updates, finalizers and
// graceful deletion, namespaces that refuse creates while Terminating.
// Every change is reported to changed (the informer caches mark the object
// pending; the scheduler delivers it later).
type API struct {
	w    *World
	rv   int64
	uids int
	objs map[string]map[string]runtime.Object
	// retained holds every volume handle and PV name that a PV with the
	// Retain policy ever named: an admin may be keeping that disk.
	retained map[string]bool
}

func newAPI(w *World) *API {
	return &API{w: w, objs: map[string]map[string]runtime.Object{}, retained: map[string]bool{}}
}

func (a *API) gr(resource string) schema.GroupResource {
	return schema.GroupResource{Group: groupOf(resource), Resource: resource}
}

func (a *API) nextRV() string {
	a.rv++
	return fmt.Sprint(a.rv)
}

// newUID is a UUID-shaped, deterministic UID (the sweep's name pattern
// wants hex and dashes).
func (a *API) newUID() types.UID {
	a.uids++
	return types.UID(fmt.Sprintf("0000aaaa-0000-4000-8000-%012x", a.uids))
}

// Get returns a copy of the stored object, or nil.
func (a *API) Get(resource, namespace, name string) runtime.Object {
	o := a.objs[resource][objKey(namespace, name)]
	if o == nil {
		return nil
	}
	return o.DeepCopyObject()
}

// peek returns the stored object itself: read only.
func (a *API) peek(resource, key string) runtime.Object { return a.objs[resource][key] }

// keys lists a resource's keys, sorted.
func (a *API) keys(resource string) []string {
	out := make([]string, 0, len(a.objs[resource]))
	for k := range a.objs[resource] {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (a *API) store(resource, key string, obj runtime.Object) {
	m := a.objs[resource]
	if m == nil {
		m = map[string]runtime.Object{}
		a.objs[resource] = m
	}
	if obj == nil {
		delete(m, key)
	} else {
		m[key] = obj
		if pv, ok := obj.(*v1.PersistentVolume); ok && pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimRetain {
			a.retained[pv.Name] = true
			if pv.Spec.CSI != nil {
				a.retained[pv.Spec.CSI.VolumeHandle] = true
			}
		}
	}
	a.w.changed(resource, key)
}

// Create stores a new object.
func (a *API) Create(obj runtime.Object) (runtime.Object, error) {
	resource := resourceOf(obj)
	m, _ := meta.Accessor(obj)
	key := objKey(m.GetNamespace(), m.GetName())
	if m.GetName() == "" {
		return nil, apierrors.NewBadRequest("no name")
	}
	if namespaced[resource] {
		ns, _ := a.peek(rNamespaces, m.GetNamespace()).(*v1.Namespace)
		if ns == nil {
			return nil, apierrors.NewNotFound(a.gr(rNamespaces), m.GetNamespace())
		}
		if ns.DeletionTimestamp != nil {
			return nil, apierrors.NewForbidden(a.gr(resource), m.GetName(),
				fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns.Name))
		}
	}
	if a.peek(resource, key) != nil {
		return nil, apierrors.NewAlreadyExists(a.gr(resource), m.GetName())
	}
	obj = obj.DeepCopyObject()
	m, _ = meta.Accessor(obj)
	m.SetUID(a.newUID())
	m.SetResourceVersion(a.nextRV())
	m.SetCreationTimestamp(metav1.NewTime(a.w.now))
	m.SetDeletionTimestamp(nil)
	m.SetGeneration(1)
	if pv, ok := obj.(*v1.PersistentVolume); ok {
		admitPV(pv)
	}
	// The snapshot kinds' status is a subresource: a create's is dropped.
	switch o := obj.(type) {
	case *snapv1.VolumeSnapshot:
		o.Status = nil
	case *snapv1.VolumeSnapshotContent:
		o.Status = nil
	}
	a.store(resource, key, obj)
	return obj.DeepCopyObject(), nil
}

// Update replaces an object: the resourceVersion, when set, must match;
// status is kept (or, for the status subresource, only status changes);
// no finalizer may be added to an object being deleted; an object being
// deleted goes once its last finalizer does.
func (a *API) Update(obj runtime.Object, status bool) (runtime.Object, error) {
	resource := resourceOf(obj)
	m, _ := meta.Accessor(obj)
	key := objKey(m.GetNamespace(), m.GetName())
	cur := a.peek(resource, key)
	if cur == nil {
		return nil, apierrors.NewNotFound(a.gr(resource), m.GetName())
	}
	cm, _ := meta.Accessor(cur)
	if rv := m.GetResourceVersion(); rv != "" && rv != cm.GetResourceVersion() {
		return nil, apierrors.NewConflict(a.gr(resource), m.GetName(),
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if uid := m.GetUID(); uid != "" && uid != cm.GetUID() {
		return nil, apierrors.NewConflict(a.gr(resource), m.GetName(), fmt.Errorf("UID mismatch"))
	}
	next := obj.DeepCopyObject()
	nm, _ := meta.Accessor(next)
	if status {
		next = cur.DeepCopyObject()
		nm, _ = meta.Accessor(next)
		copyStatus(next, obj)
	} else {
		keepStatus(next, cur)
	}
	nm.SetUID(cm.GetUID())
	nm.SetCreationTimestamp(cm.GetCreationTimestamp())
	nm.SetDeletionTimestamp(cm.GetDeletionTimestamp())
	if cm.GetDeletionTimestamp() != nil {
		old := map[string]bool{}
		for _, f := range cm.GetFinalizers() {
			old[f] = true
		}
		for _, f := range nm.GetFinalizers() {
			if !old[f] {
				return nil, apierrors.NewForbidden(a.gr(resource), m.GetName(),
					fmt.Errorf("no new finalizers can be added if the object is being deleted, found new finalizers [%s]", f))
			}
		}
	}
	nm.SetResourceVersion(a.nextRV())
	if nm.GetDeletionTimestamp() != nil && len(nm.GetFinalizers()) == 0 {
		a.store(resource, key, nil)
		a.w.gone(resource, next)
		return next.DeepCopyObject(), nil
	}
	a.store(resource, key, next)
	return next.DeepCopyObject(), nil
}

func copyStatus(dst, src runtime.Object) {
	switch d := dst.(type) {
	case *v1.PersistentVolumeClaim:
		d.Status = *src.(*v1.PersistentVolumeClaim).Status.DeepCopy()
	case *v1.PersistentVolume:
		d.Status = *src.(*v1.PersistentVolume).Status.DeepCopy()
	case *snapv1.VolumeSnapshot:
		d.Status = src.(*snapv1.VolumeSnapshot).Status.DeepCopy()
	case *snapv1.VolumeSnapshotContent:
		d.Status = src.(*snapv1.VolumeSnapshotContent).Status.DeepCopy()
	}
}

func keepStatus(dst, cur runtime.Object) {
	switch d := dst.(type) {
	case *v1.PersistentVolumeClaim:
		d.Status = *cur.(*v1.PersistentVolumeClaim).Status.DeepCopy()
	case *v1.PersistentVolume:
		d.Status = *cur.(*v1.PersistentVolume).Status.DeepCopy()
	case *v1.Namespace:
		d.Status = *cur.(*v1.Namespace).Status.DeepCopy()
	case *snapv1.VolumeSnapshot:
		d.Status = cur.(*snapv1.VolumeSnapshot).Status.DeepCopy()
	case *snapv1.VolumeSnapshotContent:
		d.Status = cur.(*snapv1.VolumeSnapshotContent).Status.DeepCopy()
	}
}

// Delete deletes an object: at once without finalizers, else it gets a
// deletionTimestamp and goes with its last finalizer. Preconditions on UID
// and resourceVersion are honoured.
func (a *API) Delete(resource, namespace, name string, pre *metav1.Preconditions) error {
	key := objKey(namespace, name)
	cur := a.peek(resource, key)
	if cur == nil {
		return apierrors.NewNotFound(a.gr(resource), name)
	}
	cm, _ := meta.Accessor(cur)
	if pre != nil {
		if pre.UID != nil && *pre.UID != cm.GetUID() || pre.ResourceVersion != nil && *pre.ResourceVersion != cm.GetResourceVersion() {
			return apierrors.NewConflict(a.gr(resource), name, fmt.Errorf("precondition failed"))
		}
	}
	if resource == rNamespaces {
		if cm.GetDeletionTimestamp() == nil {
			ns := cur.DeepCopyObject().(*v1.Namespace)
			t := metav1.NewTime(a.w.now)
			ns.DeletionTimestamp = &t
			ns.Status.Phase = v1.NamespaceTerminating
			ns.ResourceVersion = a.nextRV()
			a.store(resource, key, ns)
		}
		return nil
	}
	if len(cm.GetFinalizers()) == 0 {
		a.store(resource, key, nil)
		a.w.gone(resource, cur)
		return nil
	}
	if cm.GetDeletionTimestamp() != nil {
		return nil
	}
	next := cur.DeepCopyObject()
	nm, _ := meta.Accessor(next)
	t := metav1.NewTime(a.w.now)
	nm.SetDeletionTimestamp(&t)
	nm.SetResourceVersion(a.nextRV())
	a.store(resource, key, next)
	return nil
}

// claims lists the stored claims (read only), sorted by key.
func (a *API) claims() []*v1.PersistentVolumeClaim {
	var out []*v1.PersistentVolumeClaim
	for _, k := range a.keys(rClaims) {
		out = append(out, a.objs[rClaims][k].(*v1.PersistentVolumeClaim))
	}
	return out
}

// volumes lists the stored PVs (read only), sorted by name.
func (a *API) volumes() []*v1.PersistentVolume {
	var out []*v1.PersistentVolume
	for _, k := range a.keys(rVolumes) {
		out = append(out, a.objs[rVolumes][k].(*v1.PersistentVolume))
	}
	return out
}
