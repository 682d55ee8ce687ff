package sim

// The gap moves at rest: most of them edit what a settled world has
// (Bound claims, Available and Released PVs), which the actor phase,
// ending before most claims are bound, rarely holds. So in one schedule
// in three, once the hand-back check has settled the world, they run
// again among the moves that make the awkward states (claims made,
// deleted and cloned, static PVs pre-bound to pending claims, crashes),
// with the faults on; then the actors stop, the gap moves' damage is
// repaired and the world settles before the tear-down.

// gapMoves are the actors offered at rest.
var gapMoves = map[string]bool{"expand-claim": true, "edit-claim-vac": true, "set-volume-name": true,
	"edit-unbound-pv": true, "edit-pv-meta": true, "delete-secret": true, "class-topology": true,
	"create": true, "delete": true, "clone": true, "static-pv": true, "retain": true, "delete-released": true,
	"crash-provisioner": true}

// gapSteps is how many steps the gap moves run at rest.
const gapSteps = 120

// gapsAtRest runs the gap moves at rest, in one schedule in three
// (gaps-at-rest in Disabled leaves it out).
func (w *World) gapsAtRest() {
	if mixed("gaps-at-rest/%d", w.seed)%3 != 0 || Disabled["gaps-at-rest"] {
		return
	}
	w.tracef("---- gaps at rest: actors %v and faults on for %d steps", sortedKeys(gapMoves), gapSteps)
	w.only, w.actors, w.faults = gapMoves, true, true
	for i := 0; i < gapSteps; i++ {
		w.step(false)
	}
	w.only, w.actors, w.faults = nil, false, false
	w.tracef("---- gaps at rest: actors stop, faults off")
	w.repair()
	w.settle(0)
}
