package sim

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tether-csi/tether/pkg/inflight"
)

// Two releases of tether run side by side while one program is upgraded
// or rolled back (docs/upgrade.md): the current one, this tree, and the
// previous one. Between them the protocol differs in one key, the
// record's format (inflight.AnnFormat): the previous release neither reads
// it nor writes it. A process of the previous release is therefore this
// tree's code with the key hidden from it, as the simulator models
// external-provisioner and KCM's binder by their rules: its caches and its
// reads see every claim without the key (so it reads every record as
// format 1, whatever the key says, as the previous release did), and its
// claim writes leave the key as the stored claim has it (it writes none on
// a new record, and leaves the key behind when it drops one). test/upgrade
// runs the previous release's real binaries; this model lets the
// simulator explore what the two do to each other's records.
//
// The moves: the platform team upgrades or rolls back the binder's
// Deployment (the leader restarts at the other release; a standby started
// later is of the new one, so a failover may hand over between releases);
// a driver's owner upgrades or rolls back the provisioner's image (in
// node mode one node's process: a DaemonSet rolled node by node; in the
// centralised mode the Deployment, the new replica taking over when the
// old one's lease is lost, its call still under way, as a rolling update
// does, or at once).
type release int

const (
	current release = iota
	previous
)

func (r release) String() string {
	if r == previous {
		return "previous"
	}
	return "current"
}

func (r release) other() release { return 1 - r }

// view is what a process of release r reads of obj (a copy it may
// change): the previous release does not see the format.
func (r release) view(obj runtime.Object) runtime.Object {
	if c, ok := obj.(*v1.PersistentVolumeClaim); ok && r == previous {
		delete(c.Annotations, inflight.AnnFormat)
	}
	return obj
}

// viewList is view for each claim of a list.
func (r release) viewList(obj runtime.Object) {
	if l, ok := obj.(*v1.PersistentVolumeClaimList); ok {
		for i := range l.Items {
			r.view(&l.Items[i])
		}
	}
}

// write is what a claim write of a process of release r stores, given
// the claim stored now: the previous release leaves the format as it is.
// next is a copy the caller owns.
func (r release) write(stored, next runtime.Object) runtime.Object {
	was, ok := stored.(*v1.PersistentVolumeClaim)
	c, ok2 := next.(*v1.PersistentVolumeClaim)
	if r != previous || !ok || !ok2 {
		return next
	}
	format, had := was.Annotations[inflight.AnnFormat]
	delete(c.Annotations, inflight.AnnFormat)
	if had {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[inflight.AnnFormat] = format
	}
	return c
}

// upgradeProvisioner upgrades or rolls back one provisioner process.
func (w *World) upgradeProvisioner() string {
	i := w.rng.Intn(len(w.provs))
	from := w.provRelease[i]
	w.provRelease[i] = from.other()
	w.releaseChanges++
	name := w.provs[i].name
	if !w.cfg.Node && w.handover == nil && w.rng.Intn(2) == 0 {
		return fmt.Sprintf("driver owner: the provisioner's image %s -> %s, the new replica takes over: %s", from, from.other(), w.loseLease())
	}
	w.startProvisioner(i)
	return fmt.Sprintf("driver owner: the %s's image %s -> %s (restarted)", name, from, from.other())
}

// upgradeBinder upgrades or rolls back the binder's Deployment: the leader
// restarts at the other release; a standby keeps the release it has.
func (w *World) upgradeBinder() string {
	from := w.binderRelease
	w.binderRelease = from.other()
	w.releaseChanges++
	w.startBinder()
	return fmt.Sprintf("platform team: the binder's image %s -> %s (the leader restarted)", from, from.other())
}

// notePreviousRecord counts a record written by a process of the previous
// release (refused.go's noteRecordWrite sees each).
func (w *World) notePreviousRecord() {
	if p := w.caller; p != nil && p.release == previous {
		w.previousRecords++
	}
}
