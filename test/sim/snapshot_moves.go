package sim

import (
	"fmt"
	"slices"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-csi/tether/pkg/provisioner/protect"
)

// The tenant's and the admin's moves on snapshots (writers.go): a tenant
// snapshots claims of its namespace, deletes snapshots at any time,
// restores claims from a snapshot named by hand (ready or not, being
// deleted, of another namespace, not made yet) and writes a snapshot's
// finalizers; an admin deletes contents or edits what they name.

// liveSnapshots are the snapshots of the namespaces not being deleted.
func (w *World) liveSnapshots(filter func(*snapv1.VolumeSnapshot) bool) []*snapv1.VolumeSnapshot {
	live := map[string]bool{}
	for _, ns := range w.liveNamespaces() {
		live[ns] = true
	}
	var out []*snapv1.VolumeSnapshot
	for _, s := range w.snapshots() {
		if live[s.Namespace] && (filter == nil || filter(s)) {
			out = append(out, s)
		}
	}
	return out
}

// waitingRestores are the snapshot names claims of ns are restored from
// that no snapshot of ns has (yet).
func (w *World) waitingRestores(ns string) []string {
	var out []string
	for _, c := range w.api.claims() {
		name, ok := protect.SnapshotSourceName(c)
		if ok && c.Namespace == ns && w.api.peek(rSnapshots, objKey(ns, name)) == nil && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// tenantSnapshot makes a VolumeSnapshot of a claim of its namespace
// (mostly a bound one), sometimes under the name a restore already waits
// for.
func (w *World) tenantSnapshot() string {
	live := map[string]bool{}
	for _, ns := range w.liveNamespaces() {
		live[ns] = true
	}
	var sources, bound []*v1.PersistentVolumeClaim
	for _, c := range w.api.claims() {
		if live[c.Namespace] {
			sources = append(sources, c)
			if c.Status.Phase == v1.ClaimBound {
				bound = append(bound, c)
			}
		}
	}
	if len(sources) == 0 {
		return "tenant: nothing to snapshot"
	}
	if len(bound) > 0 && w.rng.Intn(4) > 0 {
		sources = bound
	}
	src := pick(w, sources)
	w.snap.seq++
	name := fmt.Sprintf("snap-%d", w.snap.seq)
	if waiting := w.waitingRestores(src.Namespace); len(waiting) > 0 && w.rng.Intn(2) == 0 {
		name = pick(w, waiting)
	}
	s := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: src.Namespace},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &src.Name}}}
	if _, err := w.api.Create(s); err != nil {
		return fmt.Sprintf("tenant: snapshot %s/%s: %v", src.Namespace, name, err)
	}
	return fmt.Sprintf("tenant: VolumeSnapshot %s/%s of claim %s", src.Namespace, name, src.Name)
}

// tenantDeleteSnapshot deletes a snapshot, half the time one a restore
// protects.
func (w *World) tenantDeleteSnapshot() string {
	snaps := w.liveSnapshots(func(s *snapv1.VolumeSnapshot) bool { return s.DeletionTimestamp == nil })
	if len(snaps) == 0 {
		return "tenant: no snapshot to delete"
	}
	if p := w.liveSnapshots(func(s *snapv1.VolumeSnapshot) bool { return s.DeletionTimestamp == nil && protectedSnapshot(s) }); len(p) > 0 && w.rng.Intn(2) == 0 {
		snaps = p
	}
	s := pick(w, snaps)
	if protectedSnapshot(s) {
		w.snap.deletedMidRestore++
	}
	_ = w.api.Delete(rSnapshots, s.Namespace, s.Name, nil)
	return fmt.Sprintf("tenant: delete VolumeSnapshot %s/%s (protected %v)", s.Namespace, s.Name, protectedSnapshot(s))
}

// tenantRestore makes a claim restored from a snapshot: a ready one of
// its namespace (else one not ready yet), or, one time in four, one not ready, one being deleted,
// another namespace's name, or a name no snapshot has yet; sometimes
// through dataSourceRef, which may name another namespace.
func (w *World) tenantRestore() string {
	nss := w.liveNamespaces()
	if len(nss) == 0 {
		return "tenant: no namespace"
	}
	ns := pick(w, nss)
	state := func(s *snapv1.VolumeSnapshot) string {
		switch {
		case s.DeletionTimestamp != nil:
			return "deleting"
		case s.Status != nil && s.Status.ReadyToUse != nil && *s.Status.ReadyToUse:
			return "ready"
		}
		return "not ready"
	}
	kinds := map[string][]*snapv1.VolumeSnapshot{}
	for _, s := range w.snapshots() {
		k := state(s)
		if s.Namespace != ns {
			k = "other namespace"
		}
		kinds[k] = append(kinds[k], s)
	}
	// A restore that can never be made retries until the tear-down: one in
	// four is awkward, the others wait for a ready snapshot.
	kind := "ready"
	if w.rng.Intn(4) == 0 {
		opts := []string{"not made yet"}
		for _, k := range []string{"not ready", "deleting", "other namespace"} {
			if len(kinds[k]) > 0 {
				opts = append(opts, k)
			}
		}
		kind = pick(w, opts)
	} else if len(kinds[kind]) == 0 {
		// Made at once after its snapshot, as a restore often is.
		kind = "not ready"
		if len(kinds[kind]) == 0 {
			return "tenant: no snapshot in " + ns + " to restore from"
		}
	}
	var snap *snapv1.VolumeSnapshot
	name := fmt.Sprintf("snap-%d", w.snap.seq+1+w.rng.Intn(2))
	if kind != "not made yet" {
		snap = pick(w, kinds[kind])
		name = snap.Name
	}
	return w.restoreClaim(ns, name, snap, kind)
}

// restoreClaim makes a claim of ns restored from the snapshot name (snap
// when it exists): mostly of its source claim's class and size, else of
// any; block one time in six (refused); through dataSourceRef one time in
// five, naming snap's namespace.
func (w *World) restoreClaim(ns, name string, snap *snapv1.VolumeSnapshot, kind string) string {
	class := pick(w, []string{classImmediate, classWFFC, classSecret, classRetain})
	size := pick(w, []string{"1Gi", "2Gi"})
	if snap != nil && snap.Spec.Source.PersistentVolumeClaimName != nil && w.rng.Intn(4) > 0 {
		if src, ok := w.api.peek(rClaims, objKey(snap.Namespace, *snap.Spec.Source.PersistentVolumeClaimName)).(*v1.PersistentVolumeClaim); ok {
			class, size = *src.Spec.StorageClassName, src.Spec.Resources.Requests.Storage().String()
		}
	}
	c := w.newClaim(ns, class, size)
	if w.blockClaim(c.Name) {
		block := v1.PersistentVolumeBlock
		c.Spec.VolumeMode = &block
	}
	group := snapv1.GroupName
	ref := ""
	if w.rng.Intn(5) == 0 {
		r := &v1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: name}
		if snap != nil && snap.Namespace != ns {
			r.Namespace = &snap.Namespace
		}
		c.Spec.DataSourceRef = r
		ref = " (dataSourceRef)"
	} else {
		c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: name}
	}
	out, err := w.api.Create(c)
	if err != nil {
		return fmt.Sprintf("tenant: restore claim %s/%s: %v", ns, c.Name, err)
	}
	oc := out.(*v1.PersistentVolumeClaim)
	w.claimNS[string(oc.UID)] = ns
	return fmt.Sprintf("tenant: create claim %s/%s (%s %s, uid %s, block %v) restored from snapshot %s (%s)%s", ns, c.Name, class, size,
		shortUID(oc.UID), c.Spec.VolumeMode != nil, name, kind, ref)
}

// tenantSnapshotFinalizer strips the snapshot protection from a snapshot
// that has it, or forges it on one that has not.
func (w *World) tenantSnapshotFinalizer() string {
	snaps := w.liveSnapshots(nil)
	if len(snaps) == 0 {
		return "tenant: no snapshot"
	}
	s := pick(w, snaps).DeepCopy()
	verb := "forge"
	if protectedSnapshot(s) {
		verb = "strip"
		w.snap.tampered[s.UID] = true
		s.Finalizers = slices.DeleteFunc(s.Finalizers, func(f string) bool { return f == protect.FinalizerSnapshotSource })
	} else {
		s.Finalizers = append(s.Finalizers, protect.FinalizerSnapshotSource)
	}
	if _, err := w.api.Update(s, false); err != nil {
		return fmt.Sprintf("tenant: %s the protection of %s/%s: %v", verb, s.Namespace, s.Name, err)
	}
	return fmt.Sprintf("tenant: %s the protection of VolumeSnapshot %s/%s", verb, s.Namespace, s.Name)
}

// adminDeleteContent deletes a VolumeSnapshotContent; a third of the
// time it forces it away (its finalizers removed).
func (w *World) adminDeleteContent() string {
	cs := w.contents()
	if len(cs) == 0 {
		return "admin: no VolumeSnapshotContent"
	}
	c := pick(w, cs)
	_ = w.api.Delete(rContents, "", c.Name, nil)
	if w.rng.Intn(3) > 0 {
		return "admin: delete VolumeSnapshotContent " + c.Name
	}
	w.snap.touched[c.Name] = true
	if cur, ok := w.api.Get(rContents, "", c.Name).(*snapv1.VolumeSnapshotContent); ok {
		cur.Finalizers = nil
		_, _ = w.api.Update(cur, false)
	}
	return "admin: force VolumeSnapshotContent " + c.Name + " away (its finalizers removed)"
}

// adminEditContent edits what a content names: its snapshot handle (any
// backend snapshot, or none that exists), its driver, or the snapshot it
// is bound to.
func (w *World) adminEditContent() string {
	cs := w.contents()
	if len(cs) == 0 {
		return "admin: no VolumeSnapshotContent"
	}
	c := pick(w, cs).DeepCopy()
	w.snap.touched[c.Name] = true
	var what string
	status := false
	switch w.rng.Intn(3) {
	case 0:
		handles := append(sortedKeys(w.snap.backend), "snap-9999")
		h := pick(w, handles)
		if c.Status == nil {
			c.Status = &snapv1.VolumeSnapshotContentStatus{}
		}
		c.Status.SnapshotHandle = &h
		status, what = true, "snapshot handle "+h
	case 1:
		c.Spec.Driver = "other.example"
		what = "driver other.example"
	default:
		ref := &c.Spec.VolumeSnapshotRef
		if snaps := w.snapshots(); len(snaps) > 0 && w.rng.Intn(2) == 0 {
			s := pick(w, snaps)
			ref.Namespace, ref.Name, ref.UID = s.Namespace, s.Name, s.UID
		} else {
			ref.UID = types.UID("0000cccc-0000-4000-8000-000000000000")
		}
		what = fmt.Sprintf("volumeSnapshotRef %s/%s (uid %s)", ref.Namespace, ref.Name, shortUID(ref.UID))
	}
	c.ResourceVersion = ""
	if _, err := w.api.Update(c, status); err != nil {
		return "admin: edit content " + c.Name + ": " + err.Error()
	}
	return "admin: edit VolumeSnapshotContent " + c.Name + ": " + what
}
