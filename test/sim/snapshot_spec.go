package sim

import (
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
)

// Restores at rest. The actors run for a few dozen steps from an empty
// cluster, and a claim is seldom bound, snapshotted and its snapshot ready
// while they still run: in a fifth of the schedules (from a hash of the
// seed), once the system settled and the hand-back check passed, the
// tenant takes two snapshots of bound claims, the snapshot-controller
// makes them ready, the tenant restores a claim from each, the system runs
// with the faults on until the restores are under way, and then the moves
// that matter to a restore run too for a few steps (restoreMoves; a claim deleted is mostly
// one mid-restore); then, in half of them, the system settles until only
// retries are left after two minutes (a refused claim's every retry is a
// step), and the tear-down follows; in the other half the tear-down
// deletes the claims and snapshots at once, the restores still under way.

// restoreMoves are the actors of the restores at rest.
var restoreMoves = map[string]bool{"delete": true, "delete-snapshot": true, "snapshot-finalizer": true, "restore": true,
	"snapshot": true, "delete-content": true, "edit-content": true, "crash-provisioner": true}

// restoreStart is how many steps at most the restores at rest run with
// the faults on before the actors come in (until every restore holds its
// record, is bound or gone: a refused one never does); restoreSteps how
// many then with the faults and restoreMoves on.
const (
	restoreStart = 60
	restoreSteps = 12
)

// restoresStarted: every claim of keys holds its in-flight record, is
// bound, or is gone.
func (w *World) restoresStarted(keys []string) bool {
	for _, k := range keys {
		if c, ok := w.api.peek(rClaims, k).(*v1.PersistentVolumeClaim); ok && !inflight.Holds(c) && c.Spec.VolumeName == "" {
			return false
		}
	}
	return true
}

func (w *World) restoresAtRest() bool {
	return mixed("restores-at-rest/%d", w.seed)%5 == 0 && !Disabled["restore"] && !Disabled["snapshot"] && !Disabled["restores-at-rest"]
}

// restoreSpec runs the restores at rest.
func (w *World) restoreSpec() {
	live := map[string]bool{}
	for _, ns := range w.liveNamespaces() {
		live[ns] = true
	}
	bound := w.liveClaims(func(c *v1.PersistentVolumeClaim) bool { return live[c.Namespace] && c.Status.Phase == v1.ClaimBound })
	if len(bound) == 0 {
		return
	}
	var snaps []*snapv1.VolumeSnapshot
	for i := 0; i < 2; i++ {
		src := pick(w, bound)
		w.snap.seq++
		s := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("snap-%d", w.snap.seq), Namespace: src.Namespace},
			Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &src.Name}}}
		out, err := w.api.Create(s)
		if err != nil {
			w.tracef("---- restores at rest: VolumeSnapshot %s/%s: %v", s.Namespace, s.Name, err)
			continue
		}
		snaps = append(snaps, out.(*snapv1.VolumeSnapshot))
		w.tracef("---- restores at rest: VolumeSnapshot %s/%s of claim %s", s.Namespace, s.Name, src.Name)
	}
	w.settleQuiet(0, 2*time.Minute)
	var restores []string
	for _, s := range snaps {
		w.tracef("---- restores at rest: %s", w.restoreClaim(s.Namespace, s.Name, s, "at rest"))
		restores = append(restores, objKey(s.Namespace, fmt.Sprintf("c%d", w.claimSeq)))
	}
	w.tracef("---- restores at rest: faults on until the restores are under way")
	w.faults = true
	for i := 0; i < restoreStart && !w.restoresStarted(restores); i++ {
		w.step(false)
	}
	w.tracef("---- restores at rest: actors %v and faults on for %d steps", sortedKeys(restoreMoves), restoreSteps)
	w.only, w.actors = restoreMoves, true
	for i := 0; i < restoreSteps; i++ {
		w.step(false)
	}
	w.only, w.actors, w.faults = nil, false, false
	if mixed("restores-at-rest-settle/%d", w.seed)%2 == 0 {
		w.tracef("---- restores at rest: actors stop, faults off; the tear-down at once")
		return
	}
	w.tracef("---- restores at rest: actors stop, faults off")
	w.settleQuiet(0, 2*time.Minute)
}

// restoresUnderWay are, during the restores at rest, the live claims
// restored from a snapshot that hold their record and are not bound.
func (w *World) restoresUnderWay() []*v1.PersistentVolumeClaim {
	if w.only == nil {
		return nil
	}
	return w.liveClaims(func(c *v1.PersistentVolumeClaim) bool {
		_, ok := protect.SnapshotSourceName(c)
		return ok && inflight.Holds(c) && c.Spec.VolumeName == ""
	})
}
