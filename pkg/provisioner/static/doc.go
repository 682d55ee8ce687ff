// Package static applies the reclaim policy of the CSI PVs of the driver
// that were made by hand rather than provisioned, as external-provisioner
// does with HonorPVReclaimPolicy and the provisioner library tether runs
// on does not. A PV that a provisioner made (it carries
// pv.kubernetes.io/provisioned-by) is left to the library.
//
// The files:
//   - decide.go: Decide, pure: a PV and the driver's name in, an Op out. A
//     Bound PV with Delete gets external-provisioner's deletion finalizer;
//     a Released one with Delete has its backend volume deleted, then the
//     PV; a PV with Retain or Recycle loses the finalizer.
//   - reclaimer.go: Reclaimer, the one writer of those PVs: it queues the
//     PVs of the informer for which Decide has work, asks its Deleter (the
//     Provisioner) whether a PV is this provisioner's to reclaim, and
//     carries out the Op. Finalizers are written with a merge patch that
//     carries the PV's resourceVersion; a deletion deletes the backend
//     volume, then the PV with its UID as precondition, then drops the
//     finalizer of that same PV (not of a new one under its name).
package static
