package sim

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
)

// The snapshot invariants.

// claimOfVolume is the stored claim whose UID a volume name carries.
func (w *World) claimOfVolume(name string) *v1.PersistentVolumeClaim {
	uid := uidOfName(name)
	for _, c := range w.api.claims() {
		if string(c.UID) == uid {
			return c
		}
	}
	return nil
}

// checkRestoreCreate: a restore's CreateVolume (tether's, provisioning or
// cleaning up) names only the backend snapshot that the content bound both
// ways to the claim's own VolumeSnapshot (its namespace, the name its
// immutable dataSource gives), of this driver, names now: nothing a tenant
// writes chooses the source.
func (w *World) checkRestoreCreate(req *csi.CreateVolumeRequest) {
	id := req.GetVolumeContentSource().GetSnapshot().GetSnapshotId()
	c := w.cleanup
	if c == nil {
		c = w.claimOfVolume(req.GetName())
	}
	if c == nil {
		w.violate("%s: CreateVolume of %s restores snapshot %s for no claim", w.who, req.GetName(), id)
		return
	}
	name, ok := protect.SnapshotSourceName(c)
	if !ok {
		w.violate("%s: CreateVolume of %s restores snapshot %s, and claim %s/%s names no VolumeSnapshot", w.who, req.GetName(), id, c.Namespace, c.Name)
		return
	}
	s, _ := w.api.peek(rSnapshots, objKey(c.Namespace, name)).(*snapv1.VolumeSnapshot)
	if s == nil {
		w.violate("%s: CreateVolume of %s restores snapshot %s, and claim %s/%s's VolumeSnapshot %s does not exist", w.who, req.GetName(), id, c.Namespace, c.Name, name)
		return
	}
	w.snap.restoredFrom[req.GetName()] = s.UID
	content, _ := w.api.peek(rContents, boundContent(s)).(*snapv1.VolumeSnapshotContent)
	if content == nil || !boundBack(content, s) || content.Spec.Driver != driverName || contentHandle(content) != id {
		w.violate("%s: CreateVolume of %s restores snapshot %s, which no content of this driver bound both ways to %s/%s names", w.who, req.GetName(), id, c.Namespace, name)
	}
}

// checkRestoreSources runs after every step: while a restore's
// CreateVolume may still run, or be repeated by its clean-up (it was sent,
// the claim holds its in-flight record and is not bound to its own
// volume), its VolumeSnapshot is there (the same one), and its content and
// backend snapshot: the protection holds while the record holds. But where
// the tenant wrote or removed the claim's record or the snapshot's
// protection itself, or the admin edited or forced away the content.
func (w *World) checkRestoreSources() {
	if len(w.snap.restoredFrom) == 0 {
		return
	}
	for _, c := range w.api.claims() {
		own := ownName(c)
		uid, ok := w.snap.restoredFrom[own]
		if !ok || !inflight.Holds(c) || c.Spec.VolumeName == own || w.forged[string(c.UID)] || w.stripped[own] || w.snap.tampered[uid] {
			continue
		}
		name, _ := protect.SnapshotSourceName(c)
		s, _ := w.api.peek(rSnapshots, objKey(c.Namespace, name)).(*snapv1.VolumeSnapshot)
		if s == nil || s.UID != uid {
			w.violate("restore %s/%s may still repeat its CreateVolume (it holds its record), and its VolumeSnapshot %s is gone", c.Namespace, c.Name, name)
			continue
		}
		cname := boundContent(s)
		if w.snap.touched[cname] {
			continue
		}
		content, _ := w.api.peek(rContents, cname).(*snapv1.VolumeSnapshotContent)
		if content == nil {
			w.violate("restore %s/%s may still repeat its CreateVolume (it holds its record), and the content %s of its VolumeSnapshot %s is gone", c.Namespace, c.Name, cname, name)
			continue
		}
		// An admin's edit of another content may have named this one's
		// snapshot there.
		if bs := w.snap.backend[contentHandle(content)]; bs == nil || bs.Deleted && !w.snap.touched[bs.deletedFor] {
			w.violate("restore %s/%s may still repeat its CreateVolume (it holds its record), and the backend snapshot %s of its VolumeSnapshot %s is deleted", c.Namespace, c.Name, contentHandle(content), name)
		}
	}
}

// checkDeleteSnapshot: no DeleteSnapshot reaches a backend snapshot that a
// timed-out CreateVolume still restores from (it goes on in the
// background), but where the tenant took the restore's record or the
// snapshot's protection off, or the admin edited or forced away a content.
func (w *World) checkDeleteSnapshot(bs *backendSnapshot, content string) {
	for _, p := range w.back.pending {
		if p.vol.Source != "snapshot:"+bs.ID {
			continue
		}
		if w.stripped[p.vol.Name] || w.forged[uidOfName(p.vol.Name)] || w.snap.tampered[w.snap.restoredFrom[p.vol.Name]] || w.snap.touched[content] {
			continue
		}
		w.violate("snapshot-controller: DeleteSnapshot of %s while the restore %s is still being made from it", bs.ID, p.vol.Name)
	}
}

// checkSnapshotRelease (FINDINGS.md, seed 2234): a provisioner
// process removes a snapshot's protection only when no restore from it
// whose CreateVolume was sent is in progress on the API server (its claim
// holds its record, and is not bound or is bound to another volume than
// the record's), the tenant's own writes of the record exempt. In node
// mode every node's process runs the protection on its own claim cache,
// which may not have seen a restore another node started.
func (w *World) checkSnapshotRelease(who string, snap *snapv1.VolumeSnapshot) {
	for _, c := range w.api.claims() {
		own := ownName(c)
		if c.Namespace != snap.Namespace || w.snap.restoredFrom[own] != snap.UID || w.forged[string(c.UID)] || w.stripped[own] {
			continue
		}
		if busy, _ := protect.RestoreInProgress(snap, []*v1.PersistentVolumeClaim{c}); !busy {
			continue
		}
		seen := "not in its claim cache"
		if p := w.caller; p != nil {
			if obj, ok, _ := p.caches.inf[rClaims].indexer.GetByKey(objKey(c.Namespace, c.Name)); ok {
				seen = "its cache has resourceVersion " + obj.(*v1.PersistentVolumeClaim).ResourceVersion + ", the API " + c.ResourceVersion
			}
		}
		w.violate("%s removed the protection of VolumeSnapshot %s/%s while restore %s/%s, whose CreateVolume was sent, is in progress (%s)",
			who, snap.Namespace, snap.Name, c.Namespace, c.Name, seen)
	}
}

// checkSnapshotsEnd runs at quiescence after the tear-down (every claim
// and VolumeSnapshot deleted): none is left Terminating, nor any content.
func (w *World) checkSnapshotsEnd() {
	for _, s := range w.snapshots() {
		if s.DeletionTimestamp != nil {
			w.violate("VolumeSnapshot %s/%s is stuck Terminating (finalizers %v)", s.Namespace, s.Name, s.Finalizers)
		}
	}
	for _, c := range w.contents() {
		if c.DeletionTimestamp != nil {
			w.violate("VolumeSnapshotContent %s is stuck Terminating (finalizers %v)", c.Name, c.Finalizers)
		}
	}
}

// deleteSnapshots is the tear-down's deletion of every VolumeSnapshot.
func (w *World) deleteSnapshots() {
	for _, s := range w.snapshots() {
		_ = w.api.Delete(rSnapshots, s.Namespace, s.Name, nil)
	}
}
