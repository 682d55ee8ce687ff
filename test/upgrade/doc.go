// Package upgrade runs tether's two programs at different versions on a
// real control plane (docs/upgrade.md's skew policy): the
// provisioner upgraded and rolled back while its claims are in flight, the
// binder's two replicas of different versions handing the lease over
// mid-binding, an old binder with a new provisioner and the other way
// round (through clones and restores from VolumeSnapshots too), and the
// example driver's DaemonSet in node-deployment mode rolled node by node
// on three nodes. Each case checks that every claim was bound once to a volume of
// its own, that nothing is left stuck once the claims are deleted, and
// that every volume (and snapshot) each driver made was deleted, none
// while its claim lived.
//
//   - refbuild.go: BuildRef builds the provisioner, the binder and the
//     example local driver of a git ref of this repository (the "previous
//     version"), cached under .cache/upgrade/<commit>.
//   - stack_test.go: fake nodes, each with its local driver behind a slow
//     socket (cluster.StartUnixDelayProxy), provisioners and binders whose
//     binaries are chosen per process, started and stopped by the cases,
//     and a node's pod of the DaemonSet (driver and provisioner), rolled.
//   - snapshot_test.go: the snapshot-controller and csi-snapshotter, and
//     the mixed workload: plain claims, restores, clones.
//   - mock_test.go: the csi-test mock driver, for the clones (the local
//     driver has no CLONE_VOLUME), read by the same checks (backend).
//   - check_test.go: the workload's life (exercise) and the invariants,
//     over each driver: its logs and what it holds.
//   - upgrade_test.go: the cases.
//
// `make upgrade` runs it with 200 claims per case; TETHER_UPGRADE_N sizes
// it, TETHER_UPGRADE_FROM names another previous version.
package upgrade
