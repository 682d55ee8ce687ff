// Package capacity publishes storage.k8s.io/v1 CSIStorageCapacity objects:
// for every topology segment and every StorageClass of the driver, what
// the driver's GetCapacity says is free there. kube-scheduler reads them
// (with storageCapacity: true on the CSIDriver) and places no pod where its
// volume cannot fit.
//
// The files:
//   - capacity.go: Options and Publisher, with external-provisioner's
//     labels (LabelDriverName, LabelManagedBy). Run refreshes everything
//     every poll interval, and between polls the parts asked for:
//     VolumeChanged (a volume's class in the segments its affinity
//     admits), ClassChanged and ClassHandler (one class in every
//     segment), Trigger (everything). None of these blocks; too many
//     parts waiting become one refresh of everything.
//   - publish.go: Sync, one refresh: the GetCapacity calls for each
//     (class, segment), a bounded number at a time and stopped after
//     several failures in a row, and the creates, updates and deletes
//     that bring the objects to the answers, written as each answer
//     comes. The publisher keeps a record of its objects from its own
//     writes and lists them again only after a failed write and every so
//     many full refreshes (its Role grants list, not watch); duplicates
//     found by a listing are deleted.
//   - topology.go: which segments a class's allowedTopologies admit (an
//     expression on a key the segment lacks rules nothing out).
//   - csinode.go: CSINodeHandler, a refresh of everything when a CSINode's
//     entry for the driver comes, goes or changes.
//   - owner.go: LookupOwner, the owner of the objects at
//     --capacity-ownerref-level (the pod, its controller, ...), reading
//     only the objects below the one returned, through a Getter such as
//     MetadataGetter.
//
// The handlers leave the objects of their informer's first listing to
// Run's first refresh.
package capacity
