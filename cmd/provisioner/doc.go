// Command provisioner is tether's CSI external-provisioner sidecar.
//
// Exit status: 0 when stopped by a signal, and after --help (printed on
// stdout) or --version; 2 for a bad setting (a flag, an argument, or the
// environment a flag needs), found by checkOptions before --version prints
// and before any connection; 1 for a failure once started; 3 when
// --hand-back leaves claims with the in-flight record.
//
// The files:
//   - main.go: run, which connects to the driver (and ends the process if
//     it comes back changed), builds the caches, the Provisioner and the
//     actors beside it (the in-flight reconciler, the static volumes'
//     reclaimer, the clone and snapshot protections, the orphan sweep,
//     the capacity publisher) and runs them under the lease; its CSI
//     calls are counted, and refused once the work stops, so that none
//     outlives the lease (gatedDriver, gatedProvisioner).
//   - flags.go: the options and flags, among them those of
//     external-provisioner taken with the same meaning and those accepted
//     and ignored; the client configuration.
//   - check.go: begin and checkOptions, every setting and the pod
//     environment it needs checked before --version prints and before any
//     connection.
//   - logging.go: external-provisioner's logging flags, checked and
//     applied as it does.
//   - caches.go: the informers, with the claims and PVs kept whole only
//     when this provisioner answers for them (pkg/provisioner/scope), and
//     gcPercent.
//   - relabel.go: in node-deployment mode, the PVs listed again, spaced
//     by a backoff, when this node's labels narrow, with an event on the
//     node.
//   - segments.go: the topology segments to publish capacity for, and a
//     refresh when a driver node's topology labels change.
//   - owner.go: the owner of the CSIStorageCapacity objects.
//   - snapshots.go: the VolumeSnapshot client and protection, present
//     only when the driver and the cluster both support snapshots.
//   - cluster.go: clusterID, what --orphan-policy=delete marks volumes
//     with: the flag's value, else the kube-system namespace's UID.
//   - handback.go: --hand-back, the in-flight records settled once, and
//     the exit status 3 when claims still hold one.
package main
