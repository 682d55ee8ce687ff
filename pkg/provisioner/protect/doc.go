// Package protect is the one writer of the two source-protection
// finalizers: FinalizerCloneSource on a clone's source claim and
// FinalizerSnapshotSource on a restore's VolumeSnapshot. A protected source
// cannot be deleted, so the driver can still copy it while a CreateVolume
// from it may run, or be repeated by the clean-up of a deleted claim. Both
// the adding and the removal are here; the reading and checking of a
// source before CreateVolume stay with the provisioner.
//
// Actors, what each reads and the one thing each writes:
//   - Clone (clone.go), called by Provision before CreateVolume, reads the
//     source claim it was given (and a fresh one on a conflict) and adds
//     FinalizerCloneSource to it, unless the source changed since it was
//     checked (another claim of the name, or, unprotected, one being
//     deleted or bound to another volume): then it fails and adds nothing.
//   - Snapshot (snapshot.go), its twin for restores, adds
//     FinalizerSnapshotSource to the VolumeSnapshot, unless it is another
//     snapshot of the name or, unprotected, one being deleted or bound to
//     another content.
//   - CloneProtection (clonerelease.go) reads the claim cache (a claim's
//     clones through an index by source) and, before a release, the claims
//     of the namespace on the API server (server.go); it removes
//     FinalizerCloneSource from a source claim once CloneInProgress finds
//     no clone of it in progress in either.
//   - SnapshotProtection (snapshotrelease.go) reads the claim and
//     VolumeSnapshot caches and, before a release, the API server's claims
//     alike; it removes FinalizerSnapshotSource from a snapshot once
//     RestoreInProgress finds no restore from it in progress in either.
//
// clone.go is the package's one file that writes claims (the add and the
// removal of FinalizerCloneSource; hack/writers checks it); the snapshot
// writes are in snapshot.go and snapshotrelease.go.
//
// CloneInProgress and RestoreInProgress are pure: a claim made from a
// source is in progress while it is not bound yet, while it is being
// deleted and holds its in-flight record (package inflight), and while it
// is bound but its record names another volume (users.go). The two
// reconcilers share an index of claims by the source they are made from,
// which feeds their queue on every event of such a claim (users.go); a
// protected source queues itself too.
//
// Contract of the reconcilers: a queue of source keys (namespace/name),
// given as the Queue option or made from the RateLimiter option; Reconcile
// is one worker step, which Run's workers call for each key (and the
// simulator calls itself), retrying a key that fails. The informers must
// not have been started when a reconciler is made: it adds an index and
// event handlers to them, in a fixed order.
package protect
