package sim

// The simulated world is generated from who may write what: the threat
// model of docs/design.md as data. Each row is a field (or an object's
// creation and deletion) that a party may write in a real cluster, and the
// actor move that writes it, at any time, with values that include the
// awkward ones. TestWritersHaveMoves fails when a row names a move that no
// schedule offers, or a schedule offers a move no row names: a new field
// someone may write brings its move, and a new move its row.
type writer struct {
	party, kind, field string
	// move is the actor's name (Disabled, make sim SIM_WITHOUT=...).
	move string
}

// writers is the table. Parties: tenant (a namespace's user), admin (the
// cluster's), and the other controllers and clusters that write what
// tether reads.
var writers = []writer{
	{"tenant", "PersistentVolumeClaim", "create (class, size, attributes class)", "create"},
	{"tenant", "PersistentVolumeClaim", "delete", "delete"},
	{"tenant", "PersistentVolumeClaim", "spec.dataSource (a clone of a claim, its own or another's)", "clone"},
	{"tenant", "PersistentVolumeClaim", "metadata.annotations and finalizers: a forged in-flight record", "forge"},
	{"tenant", "PersistentVolumeClaim", "metadata.finalizers: the record removed", "strip"},
	{"tenant", "PersistentVolumeClaim", "metadata.annotations[provisioner.tether.dev/in-flight-format]: a format no reader reads, no number, 1, or none, also while the claim is deleted", "format"},
	{"tenant", "Namespace", "create", "create-namespace"},
	{"tenant", "Namespace", "delete (with everything in it)", "delete-namespace"},
	{"admin", "VolumeAttributesClass", "parameters (deleted and made again)", "edit-vac"},
	{"admin", "PersistentVolume", "spec.persistentVolumeReclaimPolicy", "retain"},
	{"admin", "PersistentVolume", "delete (a Released Retain PV)", "delete-released"},
	{"admin", "PersistentVolume", "create, pre-bound (spec.claimRef) to a pending claim", "static-pv"},
	{"admin", "backend volume and PersistentVolume", "a volume made with the storage's tools and a static CSI PV of the driver for it (no provisioned-by), reclaim policy Delete, pre-bound to a pending claim or Available", "static-delete-pv"},
	{"admin", "PersistentVolume", "delete at any phase, Bound included (pv-protection holds it until its claim goes)", "delete-bound-pv"},
	{"admin", "Node", "a node whose metadata.labels[kubernetes.io/hostname] is another node's name (node-1.dc2 labelled node-1), with a PV pinned by that value; lost and back", "hostname-twin"},
	{"validating webhook or etcd", "PersistentVolume", "create refused, every one, for longer than records.SaveGrace", "refuse-pv"},
	{"admin", "PersistentVolume", "spec.nodeAffinity, generated (genAffinity): a node's own by key or hostname, a zone that may hold one node, a rack, several hosts, terms, NotIn, Exists, a node that never was", "affinity-pv"},
	{"admin", "PersistentVolume", "spec.claimRef: a kept PV bound again to another claim", "rebind-pv"},
	{"admin", "StorageClass", "delete, or made again with other parameters", "recreate-class"},
	{"tenant and admin", "StorageClass and PersistentVolumeClaim", "a class deleted with its claims (a test suite's clean-up)", "class-with-claims"},
	{"admin", "StorageClass", "metadata.annotations[tether.dev/release-on-node-loss], on and off", "class-policy"},
	{"admin", "Node", "delete, create", "node"},
	{"admin", "Node", "spec.taints[node.kubernetes.io/out-of-service], or delete: a lost node", "node-loss"},
	{"admin", "CSINode", "spec.drivers", "csinode"},
	{"admin", "VolumeAttachment", "create", "attach"},
	{"admin", "VolumeAttachment", "delete", "detach"},
	{"node lifecycle", "Node", "status.conditions[Ready], without a taint", "node-notready"},
	{"node lifecycle", "Node", "a lost node back (taint removed, or registered again)", "node-return"},
	{"autoscaler", "Node", "create and delete nodes in a zone (labels); by the thousand at once in one schedule in 25", "autoscaler"},
	{"statefulset", "PersistentVolumeClaim", "create again, under a released claim's name", "statefulset"},
	{"other cluster", "backend volume", "create, under our prefix, on the shared backend", "other-cluster"},
	{"machine", "provisioner process", "crash (memory lost, caches listed again)", "crash-provisioner"},
	{"machine", "binder process", "crash", "crash-binder"},
	{"platform team", "binder Deployment", "a standby replica with warm caches", "standby-binder"},
	{"platform team", "binder Deployment", "failover to the standby", "failover-binder"},
	{"platform team", "binder Deployment", "the image: the previous release or the current (an upgrade, a rollback)", "upgrade-binder"},
	{"driver owner", "provisioner container", "the image, one node's at a time in node mode: the previous release or the current", "upgrade-provisioner"},
	{"provisioner", "backend volume", "the orphan sweep", "sweep"},
	{"network", "Lease", "the provisioner loses its lease", "lease"},
	{"admin", "provisioner Deployment", "switch to EP and KCM and back", "switch"},
	{"admin", "provisioner Job", "provisioner --hand-back again", "hand-back"},
	{"scheduler", "PersistentVolumeClaim", "metadata.annotations[volume.kubernetes.io/selected-node]", "schedule"},
	{"tenant", "PersistentVolumeClaim", "metadata.annotations[volume.kubernetes.io/selected-node] by hand: a node, none that exists, or none", "select-node"},
	{"tenant", "PersistentVolumeClaim", "metadata.annotations[volume.kubernetes.io/storage-provisioner] and its beta key: removed, another driver's, this driver's (which claims a provisioner keeps whole)", "hand-over"},
	{"admin", "Node", "metadata.labels: a tier label set, changed, removed (a node-mode provisioner reads its PVs' affinity against them)", "relabel-node"},
	{"tenant", "VolumeSnapshot", "create, of a claim of its namespace (bound or not), under any name", "snapshot"},
	{"tenant", "VolumeSnapshot", "delete, also while a restore from it runs", "delete-snapshot"},
	{"tenant", "PersistentVolumeClaim", "spec.dataSource(Ref): a VolumeSnapshot, ready or not, being deleted, of another namespace, not made yet", "restore"},
	{"tenant", "VolumeSnapshot", "metadata.finalizers: the snapshot protection removed or forged", "snapshot-finalizer"},
	{"admin", "VolumeSnapshotContent", "delete, or forced away (finalizers removed)", "delete-content"},
	{"admin", "VolumeSnapshotContent", "status.snapshotHandle, spec.driver, spec.volumeSnapshotRef", "edit-content"},
	{"snapshot-controller", "VolumeSnapshot and VolumeSnapshotContent", "CreateSnapshot, bound both ways, ready; content and DeleteSnapshot once the snapshot is deleted and unprotected", "snapshot-controller"},
	{"tenant", "PersistentVolumeClaim", "spec.resources.requests.storage raised on a bound claim (by a gibibyte, or to 100Gi): a clone's source, one bound to another PV while it holds its record, one being deleted", "expand-claim"},
	{"tenant", "PersistentVolumeClaim", "spec.volumeAttributesClassName, bound or not, being deleted or not: gold, or a class no admin made (in node mode with -with=claim-vac-node)", "edit-claim-vac"},
	{"tenant", "PersistentVolumeClaim", "spec.volumeName: a claim made with it, or a pending claim's set once: another claim's PV, a static or Released one, none that exists, the claim's own volume (with -with=own-volume-name)", "set-volume-name"},
	{"admin", "PersistentVolume", "an Available or Released PV's capacity, accessModes, storageClassName, volumeAttributesClassName, labels, or nodeAffinity set from none", "edit-unbound-pv"},
	{"admin", "PersistentVolume", "metadata: provisioned-by removed or another driver's (with -with=pv-disowned), the deletion secret's keys removed or naming no secret, a node-loss mark removed, the deletion finalizer stripped (a Retain PV's, and the PV deleted)", "edit-pv-meta"},
	{"tenant", "Secret", "delete the provisioner secret of a live namespace, make it again", "delete-secret"},
	{"admin", "StorageClass", "allowedTopologies (mutable in place): a node, a zone, a node that never was, none", "class-topology"},
}
