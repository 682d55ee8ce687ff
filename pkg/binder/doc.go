// Package binder is tether's persistent-volume binder: it binds claims to
// volumes as kube-controller-manager's persistentvolume-binder-controller
// does, with several workers and an index instead of one worker and a scan.
//
// The decisions are pure functions (DecideClaim, DecideVolume, Index.Reserve);
// the Writer applies them; the Controller feeds them from informers. The
// informers' transform also tells another PV binder's writes
// (ForeignBinderWrite, foreign.go) and says so (foreign_notice.go).
//
// The files:
//   - match.go: ClaimNeeds (ParseClaim), what a claim asks of a volume;
//     Reject and MismatchReason, the first reason a volume is no match, in
//     the order the search checks; Satisfies, for a volume the claim names.
//   - decide_claim.go: DecideClaim and the event reasons, KCM's own.
//     decide_volume.go: DecideVolume, and the release of a volume whose
//     claim is gone.
//   - index.go: Index, every PV's newest known version, the unclaimed ones
//     grouped by class, volume mode and access modes in B-trees by size;
//     Reserve picks the best volume for a claim and reserves it, so that
//     no two workers take the same one. index_node.go: the PVs by node.
//   - store.go: Store, the newest known version of each claim, from the
//     informer or the binder's own writes; tombstones.go: recent
//     deletions, so that a late write brings no object back.
//   - slim.go: the informers' transform, which keeps of claims and PVs
//     only what the binder reads, marked so that what it cut is written
//     by patch, never erased by an update.
//   - apply.go: Writer, the only writer of claims and PVs: every write
//     carries the version it was decided on, and its answer goes into the
//     caches. A bind is four idempotent steps in KCM's order.
//     patch.go: the merge patches for objects the cache holds cut.
//   - controller.go: Options, Controller, New, Start (caches warmed on a
//     standby) and Run (workers once the caches have synced); steps.go:
//     Run's steps (SyncClaim, SyncVolume, ...), which test/sim takes one
//     at a time.
//   - handlers.go: the informers' handlers, and the waiting claims a
//     newly free volume wakes; settled.go: Settled, a bound pair with
//     nothing to write, which a resync skips and a start does not queue.
//   - sync.go: one sync of a claim or a volume, decided again after a
//     conflict; a volume is released only on the API server's word.
//   - nodeloss.go, nodeloss_apply.go, apply_nodeloss.go: the release of
//     claims whose node is lost (package nodeloss), each step checked on
//     the API server's word, and its writes.
//   - foreign.go: ForeignBinderWrite, a binding field changed by another
//     binder, from the managed fields; foreign_notice.go: the event, the
//     counter and the log line that say so, from the leader only.
//   - metrics.go: the histograms and KCM's pv_collector gauges;
//     metrics_pending.go: the claims still owed a volume. The gauges are
//     computed from the caches, and served only while leading.
package binder
