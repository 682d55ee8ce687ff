// Package libv8 holds the adapters that correct
// sig-storage-lib-external-provisioner v8, the library that runs tether's
// Provisioner (the design card keeps v8; what later releases changed is
// made up for here, in our own code). Each wraps one thing the library is
// handed at construction, and none changes what the library decides:
//
//   - client.go, PatchFinalizerClient and Client: v8 adds and removes the
//     PV deletion finalizer with an Update, which external-provisioner's
//     ClusterRole (patch, no update) refuses; they go out as patches
//     carrying the resourceVersion. Upstream made the same change in
//     library PR #164, fixed in PR #173 (v10.0.1). Client's Hooks add
//     what v8 has no place for: the claim version relayed on a new PV
//     (inflight.RelayClaimVersion), the in-flight record dropped before a
//     PV's finalizer goes, and a deleted volume's finalizer removed by a
//     JSON patch from the cache's copy (its tests checked by the API
//     server), else from fresh reads, instead of redoing the deletion on
//     a conflict.
//   - volumes.go, CopyingVolumes: v8 edits the cached PV in place before it
//     writes it, racing every other reader of the cache and leaving a
//     refused change in it; the library reads copies. Volumes.Requeue
//     hands a PV back to the library without a change of the PV (the
//     detach wait uses it). No upstream release changes this.
//   - claims.go, QuietClaims: v8 queues a claim on every update, past its
//     rate limiter, so that tether's own writes of the in-flight record
//     would restart a failing claim at once; updates that only change the
//     record are not shown to it. The record is tether's, so upstream has
//     nothing to change. Claims.Requeue hands a claim back to the library
//     without a change of the claim (the end of a wait for an edit).
//   - handlers.go: the handlers both wrappers keep for their Requeue.
//   - nodes.go, SelectedNodes: v8 does not call Provision while the
//     claim's selected node is missing, so the claim is never rescheduled;
//     the library gets a node with only the name, and Provision asks the
//     scheduler to pick again. Upstream stopped reading the Node in the
//     library (PR #194) and external-provisioner reschedules then.
//   - vacs.go, SyncedVACs: the VolumeAttributesClass lister answers with an
//     error until its informer synced, so that external-provisioner's RBAC
//     (no list/watch of the classes) fails only the claims that name one.
package libv8
