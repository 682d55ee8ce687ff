package sim

// With turns on faults left out of the default plan because they show a
// bug in tether not fixed yet (FINDINGS.md names each, with its seed);
// go run ./test/sim/cmd/sim -with=NAME runs them:
//   - exhausted-cleanup: in node mode, a clean-up's repeated CreateVolume
//     of a volume still being made answers ResourceExhausted (the volume
//     being made fills the node), as a provisioning retry's does; by
//     default the clean-up gets Aborted.
//   - resaved-pv: checkSavedPV also holds a PV saved again under a name
//     saved before (the library's retry of a create applied but answered
//     an error, landing after the PV was released, its volume deleted and
//     the PV gone) to naming no deleted volume; by default it is counted.
//   - pv-disowned: edit-pv-meta also removes a PV's
//     pv.kubernetes.io/provisioned-by or names another driver in it;
//     not a bug in tether but an admin disowning the PV, which is then
//     never deleted nor let go, as with external-provisioner (FINDINGS.md,
//     the world's gaps).
//   - own-volume-name: set-volume-name also names the claim's own volume
//     (pvc-<its UID>), which records.Decide takes for a saved PV's: the
//     record goes and the volume leaks (FINDINGS.md, the world's gaps).
//   - claim-vac-node: edit-claim-vac in node mode too, where it leads to
//     a claim bound, after a binder restart, to a PV pinned to a node lost
//     before it that the node-loss check expects released (FINDINGS.md).
var With = map[string]bool{}

// apiFaultKind is what a fault does to one API write.
type apiFaultKind int

const (
	faultNone apiFaultKind = iota
	// faultBefore fails the write before it is applied.
	faultBefore
	// faultAfter applies the write and then fails the call.
	faultAfter
)

// apiFault draws the fault for one write of a component (the actors'
// writes go to the API directly and never fail).
func (w *World) apiFault(who, verb, resource string) apiFaultKind {
	if !w.faults {
		return faultNone
	}
	switch r := w.rng.Intn(100); {
	case r < 6:
		return faultBefore
	case r < 10:
		return faultAfter
	}
	return faultNone
}

// driverFaultKind is what a fault does to one CSI call.
type driverFaultKind int

const (
	dfNone driverFaultKind = iota
	// dfTimeoutMade: the caller's deadline passes; the volume is made in the
	// background.
	dfTimeoutMade
	// dfTimeoutNothing: the caller's deadline passes; nothing is made.
	dfTimeoutNothing
	// dfExhausted: ResourceExhausted, nothing made.
	dfExhausted
	// dfUnavailable: Unavailable, nothing done.
	dfUnavailable
)

func (w *World) driverFault() driverFaultKind {
	if !w.faults {
		return dfNone
	}
	switch r := w.rng.Intn(100); {
	case r < 20:
		return dfTimeoutMade
	case r < 25:
		return dfTimeoutNothing
	case r < 29:
		return dfExhausted
	case r < 33:
		return dfUnavailable
	}
	return dfNone
}
