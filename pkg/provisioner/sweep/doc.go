// Package sweep is the provisioner's orphan sweep: it lists the CSI
// driver's volumes (ListVolumes), finds those that carry the
// provisioner's name form but that no claim and no PV accounts for, reports
// them, and, under the delete policy, deletes the ones it can prove are
// this cluster's and were never wanted by anyone.
//
// The files:
//
//   - sweeper.go: New; Run (a sweep every Interval) and Sweep (one sweep:
//     list, account, decide, report, re-check and delete).
//   - options.go: the Sweeper, its Options and the driver it lists.
//   - reports.go: the Sweeper's report list (Orphans), the volumes the
//     provisioner abandoned (Abandoned), each orphan's fate in words, and
//     the PV informer's handler.
//   - account.go: what accounts for a volume: the claims (the volume each
//     would be provisioned under, and the one its in-flight record names)
//     and the PVs (their names, and the handles of this driver's PVs, CSI
//     or in-tree migrated to it), read from the informer caches claims
//     first; and the re-check before a deletion.
//   - decide.go: Decide, the pure decision for a volume nothing accounts
//     for, over Facts and the Policy; the ownership a volume's mark proves (Ownership),
//     what PVs said of it (PVHistory), and why it is kept (KeepReason).
//   - memory.go: what the Sweeper remembers for the life of the process:
//     every volume a PV named (from the PV informer's events), and which
//     volumes were already there in its first listings of the backend;
//     and what a PV names (volumeKeys), which the accounting reads too.
//   - report.go: one entry of the report list (ReportedVolume).
//
// One actor, the Sweeper, with two entries: Sweep (Run's ticks, or a
// caller's own calls) and Abandoned (the provisioner's in-flight
// reconciler gives up cleaning up a volume); and the PV informer's
// handler, which feeds the memory.
//
// What the Sweeper reads: the driver's ListVolumes; the claim and PV
// informer caches (claims before PVs), and the names of the claims and
// PVs they do not keep whole (Options.ClaimNames, VolumeNames); the PV informer's events; on the
// re-check before a deletion, the PV of the volume's name from the API
// server; and the driver's CSIDriver object, to record its events on.
//
// What it writes: one thing, DeleteVolume of a proven orphan, and only
// under the delete policy: a volume that carries this cluster's mark for a
// Delete class, that no PV named while this process watched, that was
// first listed after the process's first listings (so it was made while
// the process watched the PVs), that was seen orphaned MinAge before on an
// earlier sweep, and that passes the re-check on fresh reads. With whole
// claim UIDs in volume names the deletion holds its claim's lock from the
// Locks it shares with the Provisioner, so no Provision of that claim in
// this process runs meanwhile. Besides, it records OrphanVolume events on
// the CSIDriver object (a warning for each orphan it reports, a normal
// event for each one it deletes) and sets its metrics,
// tether_provisioner_orphan_volumes{mark,reason} and
// tether_provisioner_orphan_volumes_deleted_total. It never writes a
// claim or a PV, and never deletes a volume the provisioner abandoned.
package sweep
