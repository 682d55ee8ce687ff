package sim

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/request"
)

// pick returns a random element of s (s must not be empty).
func pick[T any](w *World, s []T) T { return s[w.rng.Intn(len(s))] }

func (w *World) liveNamespaces() []string {
	var out []string
	for _, k := range w.api.keys(rNamespaces) {
		ns := w.api.peek(rNamespaces, k).(*v1.Namespace)
		if strings.HasPrefix(k, "ns-") && ns.DeletionTimestamp == nil {
			out = append(out, k)
		}
	}
	return out
}

func (w *World) liveClaims(filter func(*v1.PersistentVolumeClaim) bool) []*v1.PersistentVolumeClaim {
	var out []*v1.PersistentVolumeClaim
	for _, c := range w.api.claims() {
		if c.DeletionTimestamp == nil && (filter == nil || filter(c)) {
			out = append(out, c)
		}
	}
	return out
}

// tenantCreate makes a claim of a random class, sometimes with an
// attributes class.
func (w *World) tenantCreate() string {
	nss := w.liveNamespaces()
	if len(nss) == 0 {
		return "tenant: no namespace"
	}
	ns := pick(w, nss)
	class := pick(w, []string{classImmediate, classWFFC, classSecret, classRetain})
	c := w.newClaim(ns, class, pick(w, []string{"1Gi", "1Gi", "2Gi"}))
	if w.blockClaim(c.Name) {
		block := v1.PersistentVolumeBlock
		c.Spec.VolumeMode = &block
	}
	if w.rng.Intn(4) == 0 {
		vac := vacGold
		c.Spec.VolumeAttributesClassName = &vac
	}
	out, err := w.api.Create(c)
	if err != nil {
		return fmt.Sprintf("tenant: create claim %s/%s: %v", ns, c.Name, err)
	}
	oc := out.(*v1.PersistentVolumeClaim)
	w.claimNS[string(oc.UID)] = ns
	return fmt.Sprintf("tenant: create claim %s/%s (%s, uid %s, vac %v, block %v)", ns, c.Name, class, shortUID(oc.UID),
		c.Spec.VolumeAttributesClassName != nil, c.Spec.VolumeMode != nil)
}

func shortUID[T ~string](uid T) string {
	s := string(uid)
	return s[len(s)-4:]
}

// tenantForge makes a claim of the WaitForFirstConsumer class (never
// provisioned without a node) that already carries an in-flight record
// naming some other volume, sometimes with a forged clone source.
func (w *World) tenantForge() string {
	nss := w.liveNamespaces()
	var victims []string
	for _, id := range sortedKeys(w.back.vols) {
		if v := w.back.vols[id]; !v.Deleted {
			victims = append(victims, v.Name)
		}
	}
	for _, c := range w.api.claims() {
		victims = append(victims, request.VolumeName(prefix, string(c.UID), -1))
	}
	if len(nss) == 0 || len(victims) == 0 {
		return "tenant: nothing to forge"
	}
	ns := pick(w, nss)
	victim := pick(w, victims)
	c := w.newClaim(ns, classWFFC, "1Gi")
	c.Finalizers = []string{inflight.Finalizer}
	c.Annotations = map[string]string{inflight.AnnVolume: victim, inflight.AnnDriver: driverName}
	if w.rng.Intn(3) == 0 {
		ids := sortedKeys(w.back.vols)
		if len(ids) > 0 {
			c.Annotations[inflight.AnnSource] = pick(w, ids)
		}
	}
	out, err := w.api.Create(c)
	if err != nil {
		return fmt.Sprintf("tenant: forge claim: %v", err)
	}
	oc := out.(*v1.PersistentVolumeClaim)
	w.claimNS[string(oc.UID)] = ns
	w.forged[string(oc.UID)] = true
	return fmt.Sprintf("tenant: forge claim %s/%s naming volume %s (source %q)", ns, c.Name, victim, c.Annotations[inflight.AnnSource])
}

func (w *World) tenantDelete() string {
	cs := w.liveClaims(nil)
	if len(cs) == 0 {
		return "tenant: no claim to delete"
	}
	if r := w.restoresUnderWay(); len(r) > 0 && w.rng.Intn(2) == 0 {
		cs = r // the restores at rest: mostly one mid-restore
	}
	c := pick(w, cs)
	_ = w.api.Delete(rClaims, c.Namespace, c.Name, nil)
	return fmt.Sprintf("tenant: delete claim %s/%s", c.Namespace, c.Name)
}

// tenantStrip removes the in-flight record from one of the tenant's
// claims: its own volume may leak (only the sweep can see it then).
func (w *World) tenantStrip() string {
	cs := w.liveClaims(inflight.Holds)
	if len(cs) == 0 {
		return "tenant: no record to strip"
	}
	c := pick(w, cs).DeepCopy()
	// Its record, forged or not, stood for the claim's own volume.
	w.stripped[ownName(c)] = true
	inflight.Forget(c)
	if _, err := w.api.Update(c, false); err != nil {
		return fmt.Sprintf("tenant: strip %s/%s: %v", c.Namespace, c.Name, err)
	}
	return fmt.Sprintf("tenant: strip the record of %s/%s", c.Namespace, c.Name)
}

// tenantFormat writes the format annotation of the in-flight record on one
// of the tenant's claims that holds one, live or being deleted: a format
// no reader reads, a value that is no number, format 1, or none. Every
// reader leaves a record it does not read as it is (docs/upgrade.md), so
// this can hold only the tenant's own claim, which repair (the tenant
// reading the event) releases once the actors stop.
func (w *World) tenantFormat() string {
	var cs []*v1.PersistentVolumeClaim
	for _, c := range w.api.claims() {
		if inflight.Holds(c) {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return "tenant: no record to give a format"
	}
	c := pick(w, cs).DeepCopy()
	value := pick(w, []string{"2", "x", "1", ""})
	if value == "" {
		delete(c.Annotations, inflight.AnnFormat)
	} else {
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, inflight.AnnFormat, value)
	}
	if _, err := w.api.Update(c, false); err != nil {
		return fmt.Sprintf("tenant: format %q on %s/%s: %v", value, c.Namespace, c.Name, err)
	}
	if inflight.Unread(c) {
		w.unreadWritten++
	}
	return fmt.Sprintf("tenant: format %q on the record of %s/%s", value, c.Namespace, c.Name)
}

// unformat is the tenant reading the InFlightRecordUnread events: it
// removes every format annotation no reader reads.
func (w *World) unformat() {
	for _, c := range w.api.claims() {
		if inflight.Unread(c) {
			if c.DeletionTimestamp != nil {
				w.unreadHeld++
			}
			c = c.DeepCopy()
			delete(c.Annotations, inflight.AnnFormat)
			_, _ = w.api.Update(c, false)
		}
	}
}

func (w *World) tenantDeleteNamespace() string {
	nss := w.liveNamespaces()
	if len(nss) <= 1 {
		return "tenant: keeps its last namespace"
	}
	ns := pick(w, nss)
	_ = w.api.Delete(rNamespaces, "", ns, nil)
	return "tenant: delete namespace " + ns
}

func (w *World) tenantNamespace() string { return "tenant: create namespace " + w.addNamespace() }

func (w *World) editVAC() string {
	vac := w.api.Get(rVACs, "", vacGold).(*storagev1.VolumeAttributesClass)
	vac.Parameters = map[string]string{"iops": fmt.Sprint(100 * (1 + w.rng.Intn(5)))}
	// A VAC's parameters are immutable in a real cluster: this is its
	// deletion and re-creation in one step.
	vac.ResourceVersion = ""
	_, _ = w.api.Update(vac, false)
	return "tenant: re-create attributes class gold with iops " + vac.Parameters["iops"]
}

// adminRetain patches a Delete PV to Retain.
func (w *World) adminRetain() string {
	var pvs []*v1.PersistentVolume
	for _, pv := range w.api.volumes() {
		if pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete && pv.DeletionTimestamp == nil {
			pvs = append(pvs, pv)
		}
	}
	if len(pvs) == 0 {
		return "admin: no PV to retain"
	}
	pv := pick(w, pvs).DeepCopy()
	pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
	pv.ResourceVersion = ""
	_, _ = w.api.Update(pv, false)
	return "admin: patch PV " + pv.Name + " to Retain"
}

// adminDeleteReleased deletes a Released Retain PV to keep its disk.
func (w *World) adminDeleteReleased() string {
	var pvs []*v1.PersistentVolume
	for _, pv := range w.api.volumes() {
		if pv.Status.Phase == v1.VolumeReleased && pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimRetain && pv.DeletionTimestamp == nil {
			pvs = append(pvs, pv)
		}
	}
	if len(pvs) == 0 {
		return "admin: no Released Retain PV"
	}
	pv := pick(w, pvs)
	_ = w.api.Delete(rVolumes, "", pv.Name, nil)
	return "admin: delete Released PV " + pv.Name + " (keeping its disk)"
}

// adminNode deletes a node and its CSINode, or brings one back.
func (w *World) adminNode() string {
	for _, n := range nodeNames {
		if w.api.peek(rNodes, n) == nil {
			if w.loss.lost[n] {
				w.returnNode(n)
				return "admin: add node " + n + " (the lost machine is back, with its disk)"
			}
			if w.api.peek(rCSINodes, n) != nil {
				_ = w.api.Delete(rCSINodes, "", n, nil)
			}
			w.addNode(n)
			return "admin: add node " + n
		}
	}
	n := pick(w, nodeNames)
	_ = w.api.Delete(rNodes, "", n, nil)
	_ = w.api.Delete(rCSINodes, "", n, nil)
	delete(w.loss.down, n) // gone for good, not lost
	delete(w.loss.lost, n)
	if w.cfg.Node {
		w.back.nodeGone(n)
		return "admin: delete node " + n + " and its CSINode (its local volumes go with it)"
	}
	return "admin: delete node " + n + " and its CSINode"
}

// adminRecreateClass deletes a class and makes it again with other
// parameters.
func (w *World) adminRecreateClass() string {
	name := pick(w, []string{classImmediate, classWFFC, classSecret, classRetain})
	_ = w.api.Delete(rClasses, "", name, nil)
	if w.rng.Intn(3) == 0 && w.actors {
		return "admin: delete class " + name
	}
	w.create(w.class(name, 1+w.rng.Intn(3)))
	return "admin: re-create class " + name + " with other parameters"
}

// preBoundPV is an admin's PV of another driver (<kind>.example), named
// <kind>-<claim>, pre-bound to a claim and fitting it: its class, its
// attributes class, its volume mode (a block disk for a block claim).
func preBoundPV(c *v1.PersistentVolumeClaim, kind string, reclaim v1.PersistentVolumeReclaimPolicy) *v1.PersistentVolume {
	name := kind + "-" + c.Name
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("5Gi")},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: reclaim, StorageClassName: *c.Spec.StorageClassName,
			ClaimRef:                  &v1.ObjectReference{Namespace: c.Namespace, Name: c.Name},
			VolumeAttributesClassName: c.Spec.VolumeAttributesClassName,
			VolumeMode:                c.Spec.VolumeMode,
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: kind + ".example", VolumeHandle: name}}}}
}

// adminStaticPV makes a PV pre-bound to a pending claim: the claim binds
// to it, whatever its own CreateVolume did.
func (w *World) adminStaticPV() string {
	cs := w.liveClaims(func(c *v1.PersistentVolumeClaim) bool { return c.Spec.VolumeName == "" })
	if len(cs) == 0 {
		return "admin: no pending claim for a static PV"
	}
	c := pick(w, cs)
	pv := preBoundPV(c, "static", v1.PersistentVolumeReclaimRetain)
	if w.rng.Intn(2) == 0 {
		// The disk of a claim whose expansion had not finished.
		pv.Annotations = map[string]string{annPreResize: "3Gi"}
	}
	if _, err := w.api.Create(pv); err != nil {
		return "admin: static PV: " + err.Error()
	}
	return fmt.Sprintf("admin: static PV %s pre-bound to %s/%s", pv.Name, c.Namespace, c.Name)
}

// otherCluster makes a volume of its own on the shared backend: our
// prefix, its UIDs, its mark.
func (w *World) otherCluster() string {
	w.back.ids++
	name := fmt.Sprintf("%s-0000bbbb-0000-4000-8000-%012x", prefix, w.back.ids)
	vol := &backendVolume{Name: name, Request: "cap=1073741824", Other: true,
		Context: map[string]string{request.OwnerKey: "Delete/" + otherOwner}}
	if w.cfg.Node {
		vol.Node = pick(w, nodeNames)
	}
	w.back.make(vol.Node+"/"+name, vol)
	return "other cluster: make volume " + vol.ID + " " + name
}

// schedule is kube-scheduler: it picks a node for a claim of a
// WaitForFirstConsumer class that has none.
func (w *World) schedulable() []*v1.PersistentVolumeClaim {
	return w.liveClaims(func(c *v1.PersistentVolumeClaim) bool {
		if c.Spec.VolumeName != "" || c.Annotations[storagehelpers.AnnSelectedNode] != "" || w.forged[string(c.UID)] {
			return false
		}
		class, _ := w.api.peek(rClasses, *c.Spec.StorageClassName).(*storagev1.StorageClass)
		return class != nil && class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	})
}

func (w *World) schedule() string {
	cs := w.schedulable()
	nodes := w.schedulableNodes()
	if len(cs) == 0 || len(nodes) == 0 {
		return "scheduler: nothing to schedule"
	}
	c := pick(w, cs).DeepCopy()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[storagehelpers.AnnSelectedNode] = pick(w, nodes)
	if _, err := w.api.Update(c, false); err != nil {
		return "scheduler: " + err.Error()
	}
	return fmt.Sprintf("scheduler: %s/%s to %s", c.Namespace, c.Name, c.Annotations[storagehelpers.AnnSelectedNode])
}

// schedulableNodes are the nodes the scheduler may pick: it passes over a
// node out of service (its taint), and one lost (NotReady, then tainted).
func (w *World) schedulableNodes() []string {
	var nodes []string
	for _, n := range nodeNames {
		if node, ok := w.api.peek(rNodes, n).(*v1.Node); ok && outOfService(node) == nil && !w.loss.lost[n] {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// terminating lists the namespaces being deleted.
func (w *World) terminating() []string {
	var out []string
	for _, k := range w.api.keys(rNamespaces) {
		if w.api.peek(rNamespaces, k).(*v1.Namespace).DeletionTimestamp != nil {
			out = append(out, k)
		}
	}
	return out
}

// namespaceWork is the Terminating namespaces the namespace controller can
// move on: those that hold an object not being deleted yet, or nothing.
// One whose every object waits for its finalizers waits with them, as the
// real controller does (it retries with backoff): were it offered, it
// would keep the world busy at one instant, time could not pass, and a
// finalizer that goes only after a wait (a record whose node is lost for
// the grace) would never go.
func (w *World) namespaceWork() []string {
	var out []string
	for _, ns := range w.terminating() {
		waiting, left := 0, 0
		for _, r := range []string{rSecrets, rClaims, rSnapshots} {
			for _, k := range w.api.keys(r) {
				if !strings.HasPrefix(k, ns+"/") {
					continue
				}
				left++
				if o, ok := w.api.peek(r, k).(metav1.Object); ok && o.GetDeletionTimestamp() != nil {
					waiting++
				}
			}
		}
		if left == 0 || waiting < left {
			out = append(out, ns)
		}
	}
	return out
}

// namespaceController deletes what a Terminating namespace holds, and the
// namespace once it is empty.
func (w *World) namespaceController() string {
	ns := pick(w, w.namespaceWork())
	left := 0
	for _, r := range []string{rSecrets, rClaims, rSnapshots} {
		for _, k := range w.api.keys(r) {
			if strings.HasPrefix(k, ns+"/") {
				left++
				_ = w.api.Delete(r, ns, strings.TrimPrefix(k, ns+"/"), nil)
			}
		}
	}
	if left == 0 {
		w.api.store(rNamespaces, ns, nil)
		return "namespace controller: namespace " + ns + " is gone"
	}
	return fmt.Sprintf("namespace controller: deleting the %d objects of %s", left, ns)
}
