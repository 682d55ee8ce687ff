// Package sim is a seeded, deterministic simulator of tether: it runs the
// provisioner's and the binder's own code (Provision, Delete, the in-flight
// reconciler, the clone and snapshot protections, the orphan sweep,
// hand-back, the binder's syncs and writer) against a simulated API server
// (VolumeSnapshots and their contents too), informer caches that lag, a
// simulated CSI driver and a model of the provisioning library, with actors
// (a tenant, an admin, crashes, faults, other controllers) picked by a
// seeded scheduler, and checks the project's invariants after every step
// and at quiescence. Findings, seeds and figures: FINDINGS.md.
//
// The world and its parts:
//   - world.go: a schedule's world (Config, World), its processes
//     (provProc, bindProc) and how each starts.
//   - api.go, client.go: the API server (resourceVersions, finalizers,
//     deletion) and the clientsets whose calls reach it, faults included.
//   - informer.go, queue.go: caches that lag and work queues, both
//     delivered one step at a time by the scheduler; behind.go: a
//     node-mode provisioner's first listings of claims and PVs, behind
//     the watch, taken an object a step.
//   - driver.go: the CSI driver and its shared backend.
//   - library.go: sig-storage-lib-external-provisioner's controller, as a
//     model driving tether's Provision and Delete.
//   - setup.go: the classes, nodes and namespaces a schedule starts from.
//
// The scheduler and the moves:
//   - run.go: RunSchedule, the options offered at each step (Disabled names
//     the actors), settling and the tear-down.
//   - writers.go: who may write what, each row with its move
//     (TestWritersHaveMoves).
//   - verbs.go, verbs_table.go: the world checked against the API's own
//     fields: every verb each party may perform on a kind tether reads,
//     listed from the API types by reflection, and the world's table of
//     them, each a move of writers.go, a reason it cannot change a
//     decision, or a gap (TestWorldCoversTheAPI).
//   - actors.go, clones.go: the tenant's moves on claims.
//   - affinity.go, attach.go, burst.go, nodes.go: the admin's PVs of
//     generated affinities, VolumeAttachments, node churn by the thousand,
//     node-deployment mode.
//   - admin_volumes.go, twin.go, refuse_pv.go: the admin's static Delete
//     PVs, PVs deleted at any phase and pv-protection; a node whose
//     hostname label is another's name; PV creates refused (issue 49).
//   - nodeloss.go, nodeloss_moves.go: node loss, its moves.
//   - snapshots.go, snapshot_moves.go, snapshot_spec.go: VolumeSnapshots,
//     their moves, restores at rest.
//   - lease.go, standby.go, upstream.go, releases.go: a lost lease, the
//     binder's standby and failover, the switch to external-provisioner and
//     KCM and back, two releases of tether at once.
//   - refused.go, faults.go: final CreateVolume errors and classes deleted
//     with their claims (and WaitInfeasible, the provisioner's wait for an
//     edit, off but in TestSimInfeasibleWait); the fault plan.
//   - gap_moves.go, gap_meta.go, gap_rest.go: the moves of the world's
//     gaps (claims expanded, their attributes class and volumeName, PVs
//     refitted and their metadata, secrets, a class's topologies), also
//     run at rest.
//
// The checks:
//   - invariants.go: the promise (no leak, no wrong delete, nothing stuck),
//     at every step and at the end.
//   - binder_checks.go, nodeloss_checks.go, snapshot_checks.go: the
//     binder's, node loss's and snapshots' own.
//   - summary.go, short.go: Run over many schedules and what it found;
//     make mutate's short run.
package sim
