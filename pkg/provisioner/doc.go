// Package provisioner is tether's CSI provisioner: the Provisioner that
// sig-storage-lib-external-provisioner v8 runs (it calls ShouldProvision,
// Provision, ShouldDelete and Delete), and InFlight, the reconciler of the
// in-flight record that Provision writes on a claim before its first
// CreateVolume.
//
// The files are in layers; each uses only those below it:
//   - provision.go: ShouldProvision and Provision, which reads as its
//     steps, each in a file of its own below it: the current claim and
//     the volume's name (provision.go); the request's inputs (inputs.go);
//     beforecreate.go: what must hold before CreateVolume (no other
//     node's record, the record written by records.Writer, this process's
//     notes, the source's protection by package protect); calls.go: the
//     CreateVolume and what its failure means (infeasible.go: a request
//     the driver refuses as it stands waits for an edit of the claim or
//     its classes, declined by ShouldProvision meanwhile); volume.go: the
//     PV built from the answer (package request), or the unusable answer
//     deleted; then the hand-off noted (memo.go).
//   - deletion.go: ShouldDelete and Delete: the PV read again, the detach
//     wait, the deletion secret, DeleteVolume.
//   - reconcile.go: InFlight.Reconcile settles one claim's record as
//     records.Decide says, from what reconcileinput.go reads (the PV of
//     the record's name, the record's owner, its node's loss); cleanup.go
//     carries out a clean-up (the repeated CreateVolume, the
//     DeleteVolume, or the abandon); drop.go's dropRecord drops the
//     record and forgets this process's memory of the claim.
//   - nodedeploy.go: node-deployment mode (which node's claims, owning an
//     Immediate claim). pvpatch.go: the hooks the library's client gets
//     (libv8.Client), among them dropBeforeRelease (drop.go).
//   - inputs.go: every read of a request's input (class, data source,
//     VolumeAttributesClass, secrets, topology), for a first CreateVolume
//     and for a clean-up's repeat. calls.go: every CreateVolume
//     (Provision's, and a clean-up's repeat).
//     inflight.go: InFlight's options and wiring.
//   - provisioner.go: Options, the Provisioner type, New.
//   - memo.go: this process's memory per claim (hints, never the record);
//     detach.go: the detach wait's decision and memory; answers.go: what a
//     CreateVolume's answer means.
//
// What it writes: the record on claims only through records.Writer; the
// source protections only through package protect; PVs only through the
// library (via libv8.Client); backend volumes with CreateVolume and
// DeleteVolume under the claim's lock (claimlock). The rooms beside it:
// request (pure translation), records (the record's decision and writer),
// protect, libv8, static (PVs made by hand), sweep (orphans), claimlock,
// worker.
package provisioner
