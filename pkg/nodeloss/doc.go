// Package nodeloss names tether's opt-in release of claims whose node is
// lost, and decides each of its steps. A StorageClass opts in with
// AnnPolicy; tether's binder then releases a bound claim whose volume is
// pinned to one node (Pinned), once that node has been lost (deleted, or
// tainted node.kubernetes.io/out-of-service) for the claim's grace: the
// claim is deleted, so that its StatefulSet makes it again from its
// template and its pod runs elsewhere, and the PV goes (Delete) or stays
// Released (Retain), never through the driver's DeleteVolume. The
// sequence and why it loses nothing that still exists are in
// docs/design.md ("Node loss").
//
// The files:
//   - nodeloss.go: the names (the class's policy, the PV's marks, the
//     provisioner's finalizer) and what a Node object says of its loss.
//   - pin.go: Pinned, the one node a PV's affinity pins, from the affinity
//     alone and what names a node.
//   - decide.go: Decide, the next step of a PV's release: pure, objects in
//     and a step out; the binder carries it out.
//   - tracker.go: Tracker, what node events said (for the binder, and for
//     the provisioner's in-flight record, whose node-gone path follows the
//     same rules and grace); it forgets a deleted node once the grace is
//     long past.
package nodeloss
