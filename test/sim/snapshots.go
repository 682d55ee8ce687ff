package sim

import (
	"fmt"
	"slices"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tether-csi/tether/pkg/provisioner/protect"
)

// VolumeSnapshots and their protection (issue 33, item 2). The API holds
// VolumeSnapshots (a tenant's, namespaced) and VolumeSnapshotContents (the
// admin's), with finalizers and graceful deletion as for every kind; their
// status is a subresource that only the snapshot-controller writes. Every
// tether provisioner reads them through a snapshot clientset backed by the
// simulated API (a GET each, as Provision does) and runs tether's
// SnapshotProtection on a VolumeSnapshot informer, through its queue.
//
// The snapshot-controller (with csi-snapshotter's part, CreateSnapshot and
// DeleteSnapshot, on the simulated backend) is system work, one transition
// a step, read straight from the API (no cache of its own):
//   - a VolumeSnapshot of a bound claim of this driver: a backend snapshot
//     of its volume, a content bound both ways to it (deletionPolicy
//     Delete, its handle and restore size in its status, ready), and the
//     snapshot bound to it, not yet ready;
//   - then the snapshot ready, with the content's restore size;
//   - a VolumeSnapshot being deleted, once tether's protection is off it:
//     its content deleted; once that content is gone or being deleted, the
//     snapshot's own finalizer removed;
//   - a content being deleted, once the snapshot it is bound to is gone or
//     being deleted without tether's protection: DeleteSnapshot, then its
//     finalizer removed.
//
// Simplified from upstream (v8): one finalizer each on the snapshot and the
// content (the bound-protection ones); no status errors (a snapshot of a
// claim that is not bound waits); no VolumeSnapshotClass; the upstream
// controller's own check for claims being restored (it keeps a snapshot
// while a Pending claim names it) is left out, so that tether's protection
// alone keeps a snapshot under a restore; backend snapshots are reachable
// from every node (node mode) and outlive their volume.

const (
	finSnapshotBound = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"
	finContentBound  = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
)

// backendSnapshot is a snapshot on the simulated backend.
type backendSnapshot struct {
	ID, Volume string
	Size       resource.Quantity
	Deleted    bool
	// deletedFor is the content whose deletion deleted it.
	deletedFor string
}

// snapState is the snapshot world's memory.
type snapState struct {
	backend map[string]*backendSnapshot // by ID
	ids     int
	seq     int // VolumeSnapshot names
	// restoredFrom: volume names a CreateVolume restored from a snapshot,
	// to the UID of the VolumeSnapshot the request's claim named then.
	restoredFrom map[string]types.UID
	// tampered: snapshots whose protection the tenant removed; touched:
	// contents the admin edited or forced away.
	tampered map[types.UID]bool
	touched  map[string]bool
	// refused: restored claims a provisioner refused (ProvisioningFailed).
	refused                       map[types.UID]bool
	made, protected, released     int
	deletedMidRestore, backendDel int
}

func newSnapState() snapState {
	return snapState{backend: map[string]*backendSnapshot{}, restoredFrom: map[string]types.UID{},
		tampered: map[types.UID]bool{}, touched: map[string]bool{}, refused: map[types.UID]bool{}}
}

func (w *World) snapshotCounts(c map[string]int) {
	c["snapshots made"] = w.snap.made
	c["restores"] = len(w.snap.restoredFrom)
	c["restores refused"] = len(w.snap.refused)
	c["snapshot protections added"] = w.snap.protected
	c["snapshot protections removed"] = w.snap.released
	c["snapshots deleted mid-restore"] = w.snap.deletedMidRestore
	c["backend snapshots deleted"] = w.snap.backendDel
}

// newSnapClient is a snapshot clientset whose calls go to the simulated API
// server, as newClientAs's do.
func (w *World) newSnapClient(name func() string, caller *provProc) snapclientset.Interface {
	cs := &snapfake.Clientset{}
	cs.AddReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, nil })
	cs.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		prev := w.caller
		w.caller = caller
		rel := current
		if caller != nil {
			rel = caller.release
		}
		obj, err := w.react(name(), rel, action)
		w.caller = prev
		return true, obj, err
	})
	return cs
}

func (w *World) snapshots() []*snapv1.VolumeSnapshot {
	var out []*snapv1.VolumeSnapshot
	for _, k := range w.api.keys(rSnapshots) {
		out = append(out, w.api.peek(rSnapshots, k).(*snapv1.VolumeSnapshot))
	}
	return out
}

func (w *World) contents() []*snapv1.VolumeSnapshotContent {
	var out []*snapv1.VolumeSnapshotContent
	for _, k := range w.api.keys(rContents) {
		out = append(out, w.api.peek(rContents, k).(*snapv1.VolumeSnapshotContent))
	}
	return out
}

func boundContent(s *snapv1.VolumeSnapshot) string {
	if s.Status == nil || s.Status.BoundVolumeSnapshotContentName == nil {
		return ""
	}
	return *s.Status.BoundVolumeSnapshotContentName
}

func contentHandle(c *snapv1.VolumeSnapshotContent) string {
	if c.Status == nil || c.Status.SnapshotHandle == nil {
		return ""
	}
	return *c.Status.SnapshotHandle
}

func boundBack(c *snapv1.VolumeSnapshotContent, s *snapv1.VolumeSnapshot) bool {
	ref := c.Spec.VolumeSnapshotRef
	return ref.UID == s.UID && ref.Namespace == s.Namespace && ref.Name == s.Name
}

func protectedSnapshot(s *snapv1.VolumeSnapshot) bool {
	return slices.Contains(s.Finalizers, protect.FinalizerSnapshotSource)
}

// snapJob is one transition the snapshot-controller may make.
type snapJob struct {
	what string
	run  func() string
}

// snapshotJobs lists the snapshot-controller's transitions due now.
func (w *World) snapshotJobs() []snapJob {
	var jobs []snapJob
	for _, s := range w.snapshots() {
		s := s
		key := objKey(s.Namespace, s.Name)
		cname := boundContent(s)
		content, _ := w.api.peek(rContents, cname).(*snapv1.VolumeSnapshotContent)
		switch {
		case s.DeletionTimestamp != nil:
			if protectedSnapshot(s) || !slices.Contains(s.Finalizers, finSnapshotBound) {
				continue
			}
			if content != nil && boundBack(content, s) && content.DeletionTimestamp == nil {
				jobs = append(jobs, snapJob{"delete content " + cname, func() string {
					_ = w.api.Delete(rContents, "", cname, nil)
					return fmt.Sprintf("snapshot-controller: %s is deleted and unprotected: delete its content %s", key, cname)
				}})
				continue
			}
			jobs = append(jobs, snapJob{"unbind " + key, func() string {
				w.dropFinalizer(rSnapshots, s.Namespace, s.Name, finSnapshotBound)
				return fmt.Sprintf("snapshot-controller: %s: its content is going, its finalizer goes", key)
			}})
		case cname == "":
			if vol, pv := w.snapshotSource(s); vol != nil {
				jobs = append(jobs, snapJob{"create " + key, func() string { return w.createSnapshot(s, pv, vol) }})
			}
		case s.Status.ReadyToUse == nil || !*s.Status.ReadyToUse:
			if content != nil && boundBack(content, s) && content.Status != nil && content.Status.ReadyToUse != nil && *content.Status.ReadyToUse {
				jobs = append(jobs, snapJob{"ready " + key, func() string {
					fresh := w.api.Get(rSnapshots, s.Namespace, s.Name).(*snapv1.VolumeSnapshot)
					ready := true
					fresh.Status.ReadyToUse = &ready
					if n := content.Status.RestoreSize; n != nil {
						fresh.Status.RestoreSize = resource.NewQuantity(*n, resource.BinarySI)
					}
					if _, err := w.api.Update(fresh, true); err != nil {
						return "snapshot-controller: " + err.Error()
					}
					return fmt.Sprintf("snapshot-controller: %s is ready", key)
				}})
			}
		}
	}
	for _, c := range w.contents() {
		c := c
		if c.DeletionTimestamp == nil || !slices.Contains(c.Finalizers, finContentBound) {
			continue
		}
		ref := c.Spec.VolumeSnapshotRef
		s, _ := w.api.peek(rSnapshots, objKey(ref.Namespace, ref.Name)).(*snapv1.VolumeSnapshot)
		if s != nil && s.UID == ref.UID && (s.DeletionTimestamp == nil || protectedSnapshot(s)) {
			continue
		}
		jobs = append(jobs, snapJob{"delete " + c.Name, func() string {
			h := contentHandle(c)
			msg := fmt.Sprintf("snapshot-controller: content %s is deleted, its snapshot gone: ", c.Name)
			if c.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete && h != "" {
				msg += w.deleteBackendSnapshot(h, c.Name) + "; "
			}
			w.dropFinalizer(rContents, "", c.Name, finContentBound)
			return msg + "its finalizer goes"
		}})
	}
	return jobs
}

// snapshotSource is the volume a VolumeSnapshot's source claim is bound
// to, with its PV, when that claim is bound to a PV of this driver whose
// volume exists.
func (w *World) snapshotSource(s *snapv1.VolumeSnapshot) (*backendVolume, *v1.PersistentVolume) {
	if s.Spec.Source.PersistentVolumeClaimName == nil {
		return nil, nil
	}
	c, _ := w.api.peek(rClaims, objKey(s.Namespace, *s.Spec.Source.PersistentVolumeClaimName)).(*v1.PersistentVolumeClaim)
	if c == nil || c.Status.Phase != v1.ClaimBound || c.Spec.VolumeName == "" {
		return nil, nil
	}
	pv, _ := w.api.peek(rVolumes, c.Spec.VolumeName).(*v1.PersistentVolume)
	if pv == nil || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driverName {
		return nil, nil
	}
	v := w.back.vols[pv.Spec.CSI.VolumeHandle]
	if v == nil || v.Deleted {
		return nil, nil
	}
	return v, pv
}

// createSnapshot is CreateSnapshot on the backend, the content made and
// bound both ways, and the snapshot bound to it (not ready yet).
func (w *World) createSnapshot(s *snapv1.VolumeSnapshot, pv *v1.PersistentVolume, vol *backendVolume) string {
	w.snap.ids++
	w.snap.made++
	size := pv.Spec.Capacity[v1.ResourceStorage]
	bs := &backendSnapshot{ID: fmt.Sprintf("snap-%04d", w.snap.ids), Volume: vol.ID, Size: size}
	w.snap.backend[bs.ID] = bs
	mode := v1.PersistentVolumeFilesystem
	if pv.Spec.VolumeMode != nil {
		mode = *pv.Spec.VolumeMode
	}
	handle := vol.ID
	name := "snapcontent-" + string(s.UID)
	content := &snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{finContentBound}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: v1.ObjectReference{Kind: "VolumeSnapshot", APIVersion: snapv1.SchemeGroupVersion.String(),
				Namespace: s.Namespace, Name: s.Name, UID: s.UID},
			DeletionPolicy: snapv1.VolumeSnapshotContentDelete, Driver: driverName,
			Source: snapv1.VolumeSnapshotContentSource{VolumeHandle: &handle}, SourceVolumeMode: &mode}}
	out, err := w.api.Create(content)
	if err != nil {
		return "snapshot-controller: " + err.Error()
	}
	oc := out.(*snapv1.VolumeSnapshotContent)
	ready := true
	bytes := size.Value()
	oc.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &bs.ID, ReadyToUse: &ready, RestoreSize: &bytes}
	if _, err := w.api.Update(oc, true); err != nil {
		return "snapshot-controller: " + err.Error()
	}
	fresh := w.api.Get(rSnapshots, s.Namespace, s.Name).(*snapv1.VolumeSnapshot)
	fresh.Finalizers = append(fresh.Finalizers, finSnapshotBound)
	fresh, err = w.updateSnapshot(fresh, false)
	if err != nil {
		return "snapshot-controller: " + err.Error()
	}
	notReady := false
	fresh.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &name, ReadyToUse: &notReady}
	if _, err := w.updateSnapshot(fresh, true); err != nil {
		return "snapshot-controller: " + err.Error()
	}
	return fmt.Sprintf("snapshot-controller: CreateSnapshot %s of %s (%s) for %s/%s, content %s bound", bs.ID, vol.ID, vol.Name, s.Namespace, s.Name, name)
}

func (w *World) updateSnapshot(s *snapv1.VolumeSnapshot, status bool) (*snapv1.VolumeSnapshot, error) {
	out, err := w.api.Update(s, status)
	if err != nil {
		return nil, err
	}
	return out.(*snapv1.VolumeSnapshot), nil
}

// dropFinalizer removes a finalizer from the stored object (which may then
// go).
func (w *World) dropFinalizer(resource, namespace, name, fin string) {
	switch o := w.api.Get(resource, namespace, name).(type) {
	case *snapv1.VolumeSnapshot:
		o.Finalizers = slices.DeleteFunc(o.Finalizers, func(f string) bool { return f == fin })
		_, _ = w.api.Update(o, false)
	case *snapv1.VolumeSnapshotContent:
		o.Finalizers = slices.DeleteFunc(o.Finalizers, func(f string) bool { return f == fin })
		_, _ = w.api.Update(o, false)
	}
}

// deleteBackendSnapshot is DeleteSnapshot (a missing one is fine).
func (w *World) deleteBackendSnapshot(id, content string) string {
	bs := w.snap.backend[id]
	if bs == nil || bs.Deleted {
		return "DeleteSnapshot " + id + ": not found (ok)"
	}
	w.checkDeleteSnapshot(bs, content)
	bs.Deleted, bs.deletedFor = true, content
	w.snap.backendDel++
	return "DeleteSnapshot " + id
}

// snapshotController makes one of the transitions due.
func (w *World) snapshotController() string {
	jobs := w.snapshotJobs()
	if len(jobs) == 0 {
		return "snapshot-controller: nothing to do"
	}
	return pick(w, jobs).run()
}

// restoreFrom is the driver's side of a restore: the snapshot must exist
// on the backend.
func (w *World) restoreFrom(src string) bool {
	id, ok := strings.CutPrefix(src, "snapshot:")
	if !ok {
		return true
	}
	bs := w.snap.backend[id]
	return bs != nil && !bs.Deleted
}

// noteSnapshotWrite counts the protection's writes by tether's processes.
func (w *World) noteSnapshotWrite(who string, before *snapv1.VolumeSnapshot, obj runtime.Object) {
	after, _ := obj.(*snapv1.VolumeSnapshot)
	if before == nil || after == nil || !strings.HasPrefix(who, "provisioner") {
		return
	}
	switch had, has := protectedSnapshot(before), protectedSnapshot(after); {
	case !had && has:
		w.snap.protected++
	case had && !has:
		w.snap.released++
		w.checkSnapshotRelease(who, after)
	}
}

// noteRestoreEvent counts the restores a provisioner refused.
func (w *World) noteRestoreEvent(obj runtime.Object, reason string) {
	if c, ok := obj.(*v1.PersistentVolumeClaim); ok && reason == "ProvisioningFailed" {
		if _, ok := protect.SnapshotSourceName(c); ok {
			w.snap.refused[c.UID] = true
		}
	}
}
