// Package inflight names the record that tether's provisioner keeps on a
// claim while a backend volume may exist for it that no PV tracks yet, and
// says when that record may go. The binder reads it too: when it binds a
// claim to the PV provisioned for it, it drops the record in the same
// write, which saves the provisioner a write of its own. It also holds the
// one other protocol between the two programs, the claim-version relay
// (RelayClaimVersion, ClaimBehindVolume): the version of the claim a
// provisioned PV was made for, which tells the binder when its cache can
// bind it.
//
// Every function is pure; those that change a claim or a PV change it in
// place, and are called on the copy about to be written.
//
// The files:
//   - inflight.go: the record's names (Finalizer; AnnVolume, AnnDriver
//     and, in node-deployment mode, AnnNode; the older AnnSource and
//     AnnSnapshot, only removed) and what is done with it: Holds, Record,
//     Volume, Tracks (a PV is the one the record is for), Forget, Settle
//     (Forget once a PV tracks the volume), and Strip, a read-only copy
//     of a claim without the record.
//   - format.go: AnnFormat, the version of the rules a record was written
//     by, and the skew rule between releases; Format reads it, and a
//     record of a format this version does not read is left as it is
//     (Unread; never tracked nor settled).
//   - relay.go: the claim-version relay in a provisioned PV's
//     claimRef.resourceVersion: RelayClaimVersion (the provisioner's
//     side) and ClaimBehindVolume (the binder's). The relayed version is a
//     hint for when to bind, never a condition of binding.
package inflight
