// Package records is the provisioner's side of the in-flight record: the
// finalizer and annotations on a claim that say a backend volume may exist
// for it that no PV tracks yet (its schema is package inflight, which the
// binder reads too).
//
// The record's life, in the words the code uses:
//   - record: Provision writes it (Writer.Record) before the claim's first
//     CreateVolume, in the same write that names the volume and, in
//     node-deployment mode, the node;
//   - settle: the in-flight reconciler (package provisioner's InFlight)
//     reads a claim that holds a record, and Decide says what becomes of
//     it: Keep, Requeue (look again after a wait), Drop, CleanUp, or one
//     of the two drops that need no driver call (DropNoneMade,
//     DropNodeGone);
//   - drop: the record goes (Writer.Drop), once a PV tracks the volume, or
//     the volume is proven absent or deleted; the binder drops it too, in
//     the write that binds the claim;
//   - clean up: the volume of a claim that is deleted, or will never use
//     it, is found again by repeating its CreateVolume and deleted; the
//     record is dropped after;
//   - abandon: a clean-up that can never complete (its class or secret is
//     gone for good) is given up, reported, and the record dropped, so that
//     no claim or namespace stays Terminating for ever.
//
// Map:
//   - decide.go: Decide, pure (objects in, a Step out), with Input, the
//     graces it applies, and the pure readings of a record: Volume (which
//     volume it stands for: nothing a tenant writes can choose it), OwnerOf
//     and Node (whose it is in node-deployment mode).
//   - writer.go: Writer, the one writer of the record on claims (and of the
//     claim's selected node when a claim is handed back to the scheduler).
//   - metrics.go: the gauges of the records a provisioner answers for.
package records
