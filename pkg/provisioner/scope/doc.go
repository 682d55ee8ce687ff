// Package scope decides which claims and PVs one provisioner keeps whole
// in its caches, and builds the informers that keep only those: the
// claims and PVs it answers for, and not the rest of the cluster's. Of the
// others it keeps names only, as hashes (Seen), for the readers that must
// know every volume name in use (the orphan sweep, the check that a new
// volume's name is free).
//
// The files:
//   - rules.go: Scope, pure: Claim and Volume (whether to keep one whole:
//     a PV the provisioner answers for, Ours, while it is not Settled),
//     KeepClaim and KeepVolume (whether one kept stays kept), MayBeOn (a
//     PV's node affinity against a node whose labels may still grow), and
//     NarrowedLabels and NarrowedKeys (a change of the node's labels
//     that needs a new listing, and its keys).
//   - keeper.go: Keeper, one resource's state: the keys and UIDs it keeps,
//     and its Seen; it takes a listing (Relist) and each watch event
//     (Added, Modified, Deleted) and says Keep, Forget or Skip; or a
//     listing behind the watch (Behind, Backfill, CaughtUp), during which
//     the watch's word on a key wins over the listing's.
//   - seen.go: Seen, the counted hashes of every object's names (the last
//     listing's as a sorted slice, the changes since in a map).
//   - gone.go: Gone, the UIDs of the last bound claims deleted, so that a
//     reader need not ask the API server about a claim it saw go.
//   - watch.go: ListerWatcher, a resource's list and watch through a
//     Keeper: listings a page at a time, what is kept passed on, a
//     deletion for what is no longer kept, a bookmark for what is skipped.
//   - pages.go: PageReader, one page of a listing handed over an object at
//     a time: StreamPages decodes the API server's protobuf as it arrives
//     (so pages may be large), TypedPages reads a client's List whole.
//   - behind.go: a listing behind the watch (ListerWatcher.Behind): its
//     first page served as the listing, the rest read by the watch that
//     follows and merged into its events through Keeper.Backfill.
//   - relist.go: ListerWatcher.Relist (a new listing through the Keeper,
//     asked for when the node's labels narrow, without a restart), and
//     RelistBackoff, which spaces those listings.
//   - informers.go: the claim and PV Keepers of a Scope, and the informers
//     built on them.
//
// It writes nothing. The simulator (test/sim) runs the same Keepers on its
// caches, so every schedule runs the provisioner on what it keeps.
package scope
