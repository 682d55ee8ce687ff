// Package claimlock serialises the work on one claim across the
// provisioner's actors: Provision, the in-flight record's reconciler, the
// release of a PV's finalizer and the orphan sweep each hold a claim's lock
// (by its UID) while they call the driver or write the claim's record, so
// that a CreateVolume and the clean-up of the same volume never interleave.
// One Set is made at start and given to each actor's constructor.
//
// The files:
//   - claimlock.go: Set, a mutex per key whose zero value is ready to use;
//     Lock waits for a key and TryLock takes it only if it is free (a
//     worker that finds a claim busy requeues it). Both return the unlock.
//     A key's mutex is counted by its holders and waiters and forgotten
//     when the last lets go, so the Set holds only the keys in use.
package claimlock
