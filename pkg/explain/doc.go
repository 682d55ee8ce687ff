// Package explain says why a PersistentVolumeClaim is in the state it is
// in, from the objects around it: objects in, an Explanation out, no API
// calls. The volume matching is the binder's own (binder.ParseClaim,
// binder.Reject, the binder's Index and binder.DecideClaim), so the answer
// is what the binder itself would do with the same objects.
//
// What could not be read is named in the Input (Gap), and the answer then
// says what it cannot tell (CannotTell) instead of guessing.
//
// The files:
//   - explain.go: the types: Input, Explanation (whose JSON field names
//     are stable), Cause and the Cause* constants, Candidate, Provisioning
//     and the parts it shows.
//   - why.go: Explain, which goes through the claim's state: terminating
//     (what each finalizer waits for), bound or lost, invalid, naming its
//     volume, waiting for a static volume or for provisioning.
//   - plan.go: ReadPlan and Plan, what to read for one claim (a bound
//     claim costs a few gets, only an unbound one lists the volumes); the
//     exit statuses of kubectl tether why (ExitCode); and the rows of the
//     table of waiting claims (Waiting, Row, SortRows, RowsSummary).
//   - volumes.go: the candidates of an unbound claim, each with the
//     binder's first reason to pass it over; a volume named in
//     spec.volumeName; the cause and the advice when only a static volume
//     can serve the claim.
//   - counts.go: the candidates counted by reason (CountsText), the
//     nearest few (BestCandidatesShown), and Causes, every cause an
//     explanation can give.
//   - provisioning.go: the dynamic path: the provisioner that serves the
//     claim, its Leases (LeaseNames, LeaseName) and whether it runs, the
//     pods that use the claim, the events, the in-flight record and the
//     published capacity.
//   - cause.go: the causes of the dynamic path, from waiting for a
//     consumer to a failed CreateVolume or no capacity.
//   - binders.go: WhichBinder, which binder runs (tether's or
//     kube-controller-manager's), from their Leases; NoBinder when none
//     leads.
//   - nodeloss.go: the node-loss marks on the claim's volume (NodeLoss),
//     and the causes NodeLost and ReleasedForNodeLoss.
//   - anotherbinder.go: the latest event that says another PV binder
//     wrote the claim or its volume.
package explain
