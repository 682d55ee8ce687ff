package sim

import "slices"

// verbRow is a row of the world's table: a verb a party may perform on a
// kind (verbs.go enumerates them from the API types) and the moves of
// writers.go that perform it; or, without moves, why the verb cannot
// change a decision of the binder or the provisioner. A row of worldGaps
// has no move either, and its why, beginning "GAP:", says what it could
// change that no move writes.
type verbRow struct {
	party, kind, verb string
	moves             []string
	why               string
}

// moved is a row whose verb the moves perform.
func moved(party, kind, verb string, moves ...string) verbRow {
	return verbRow{party: party, kind: kind, verb: verb, moves: moves}
}

// inert is a row whose verb cannot change a decision, and why.
func inert(party, kind, verb, why string) verbRow {
	return verbRow{party: party, kind: kind, verb: verb, why: why}
}

// inertAll is rows of one reason.
func inertAll(party, kind, why string, verbs ...string) []verbRow {
	out := make([]verbRow, len(verbs))
	for i, v := range verbs {
		out[i] = inert(party, kind, v, why)
	}
	return out
}

// The table's kinds and parties, and the reasons many rows share.
const (
	kPV, kPVC, kSC, kNode = "PersistentVolume", "PersistentVolumeClaim", "StorageClass", "Node"
	kCSINode, kVA, kVAC   = "CSINode", "VolumeAttachment", "VolumeAttributesClass"
	kVS, kVSC             = "VolumeSnapshot", "VolumeSnapshotContent"
	kNS, kSecret          = "Namespace", "Secret"
	pTenant, pAdmin       = "tenant", "admin"
	pSnapCtrl             = "snapshot-controller"
	noDecision            = "read by no decision of the binder or the provisioner"
	pvSource              = "immutable after creation (API validation: spec.persistentvolumesource; csi.controllerExpandSecretRef may be set once, read by the resizer only)"
	claimSpec             = "immutable after creation (API validation: a claim's spec but resources.requests and volumeAttributesClassName of a bound claim, and an empty volumeName)"
	classSpec             = "immutable (API validation): a class changes only when deleted and made again, recreate-class"
	vacSpec               = "immutable (API validation): changed only by deleting the class and making it again, edit-vac"
	vaSpec                = "immutable (API validation: a VolumeAttachment's spec)"
)

// worldTable is the world's table: every verb of enumerate, but the gaps.
var worldTable = slices.Concat([]verbRow{
	moved(pTenant, kPVC, "create", "create", "clone", "restore", "forge", "rebind-pv"),
	moved(pTenant, kPVC, "delete at Pending", "delete", "delete-namespace", "class-with-claims"),
	moved(pTenant, kPVC, "delete at Bound", "delete", "delete-namespace", "class-with-claims"),
	moved(pTenant, kPVC, "delete at Lost", "delete", "delete-namespace", "class-with-claims"),
	inert(pTenant, kPVC, "update metadata.labels", noDecision+": the binder keeps them only to share memory (slim.go), scope reads none"),
	moved(pTenant, kPVC, "update metadata.annotations", "format", "select-node", "hand-over"),
	moved(pTenant, kPVC, "update metadata.finalizers", "strip"),
	inert(pTenant, kPVC, "update spec.storageClassName", "immutable after creation but from none to the class its beta annotation names (API validation): the class asked for stays"),
	moved("scheduler", kPVC, "update metadata.annotations", "schedule"),
	moved("statefulset", kPVC, "create", "statefulset"),

	moved(pAdmin, kPV, "create", "static-pv", "affinity-pv", "static-delete-pv"),
	moved("admission webhook", kPV, "create", "refuse-pv"),
	moved(pAdmin, kPV, "delete at Pending", "delete-bound-pv"),
	moved(pAdmin, kPV, "delete at Available", "delete-bound-pv"),
	moved(pAdmin, kPV, "delete at Bound", "delete-bound-pv"),
	moved(pAdmin, kPV, "delete at Released", "delete-released", "delete-bound-pv"),
	moved(pAdmin, kPV, "delete at Failed", "delete-bound-pv"),
	moved(pAdmin, kPV, "update spec.claimRef", "rebind-pv"),
	moved(pAdmin, kPV, "update spec.persistentVolumeReclaimPolicy", "retain"),
	inert(pAdmin, kPV, "update spec.mountOptions", "passed to the node's mount, read by no decision"),
	inert(pAdmin, kPV, "update spec.volumeMode", "immutable after creation (API validation)"),

	moved(pAdmin, kSC, "create", "recreate-class"),
	moved(pAdmin, kSC, "delete", "recreate-class", "class-with-claims"),
	inert(pAdmin, kSC, "update metadata.labels", noDecision),
	moved(pAdmin, kSC, "update metadata.annotations", "class-policy"),
	inert(pAdmin, kSC, "update metadata.finalizers", "hold a deleted class only; "+noDecision),
	inert(pAdmin, kSC, "update mountOptions", "copied to the PVs it makes, passed to the node's mount; read by no decision"),
	inert(pAdmin, kSC, "update allowVolumeExpansion", "the resizer's and admission's; "+noDecision),

	moved(pAdmin, kNode, "create", "node", "autoscaler", "hostname-twin"),
	moved(pAdmin, kNode, "delete", "node", "node-loss", "autoscaler"),
	moved(pAdmin, kNode, "update metadata.labels", "relabel-node", "hostname-twin"),
	inert(pAdmin, kNode, "update metadata.annotations", noDecision+" (tether reads a node's name, labels and out-of-service taint)"),
	inert(pAdmin, kNode, "update metadata.finalizers", "hold a deleted node only; "+noDecision),
	inert(pAdmin, kNode, "update spec.unschedulable", "the scheduler's: a selected node is its word; "+noDecision),
	moved(pAdmin, kNode, "update spec.taints", "node-loss"),
	inert("node lifecycle", kNode, "update spec.taints", "the not-ready and unreachable taints: tether reads only node.kubernetes.io/out-of-service, an admin's (node-loss)"),
	moved("node lifecycle", kNode, "update status.conditions", "node-notready"),
	moved("kubelet", kNode, "create", "node", "node-return"),
	moved("kubelet", kNode, "update metadata.labels", "relabel-node"),
	moved("kubelet", kNode, "update status.conditions", "node-notready"),
	moved("autoscaler", kNode, "create", "autoscaler"),
	moved("autoscaler", kNode, "delete", "autoscaler"),

	moved(pAdmin, kCSINode, "create", "node"),
	moved(pAdmin, kCSINode, "delete", "node"),
	moved(pAdmin, kCSINode, "update spec.drivers", "csinode"),
	moved("kubelet", kCSINode, "create", "node"),
	moved("kubelet", kCSINode, "update spec.drivers", "csinode"),

	moved(pAdmin, kVA, "create", "attach"),
	moved(pAdmin, kVA, "delete", "detach"),
	inert(pAdmin, kVA, "update metadata.finalizers", "only hold a deleted VolumeAttachment, which the wait for detach takes as one not deleted yet (detach)"),
	moved("attach-detach controller", kVA, "create", "attach"),
	moved("attach-detach controller", kVA, "delete", "detach"),
	inert("external-attacher", kVA, "update metadata.finalizers", "only hold a deleted VolumeAttachment, which the wait for detach takes as one not deleted yet (detach)"),
	inert("external-attacher", kVA, "update status.attached", "the wait for detach waits while a VolumeAttachment names the PV, attached or not"),

	moved(pAdmin, kVAC, "create", "edit-vac"),
	moved(pAdmin, kVAC, "delete", "edit-vac"),

	moved(pTenant, kVS, "create", "snapshot"),
	moved(pTenant, kVS, "delete", "delete-snapshot", "delete-namespace"),
	inert(pTenant, kVS, "update metadata.annotations", noDecision+": a restore reads the snapshot's status, finalizers and bound content"),
	moved(pTenant, kVS, "update metadata.finalizers", "snapshot-finalizer"),
	inert(pTenant, kVS, "update spec.source", "immutable (the CRD's rule); a restore reads the bound content's handle, never the source"),
	inert(pTenant, kVS, "update spec.volumeSnapshotClassName", "the snapshot-controller's choice of class; a restore reads the bound content"),
	moved(pSnapCtrl, kVS, "update metadata.finalizers", "snapshot-controller"),
	moved(pSnapCtrl, kVS, "update status.boundVolumeSnapshotContentName", "snapshot-controller"),
	moved(pSnapCtrl, kVS, "update status.readyToUse", "snapshot-controller"),
	moved(pSnapCtrl, kVS, "update status.restoreSize", "snapshot-controller"),

	moved(pAdmin, kVSC, "delete", "delete-content"),
	moved(pAdmin, kVSC, "update metadata.finalizers", "delete-content"),
	moved(pAdmin, kVSC, "update spec.volumeSnapshotRef", "edit-content"),
	moved(pAdmin, kVSC, "update spec.driver", "edit-content"),
	inert(pAdmin, kVSC, "update spec.deletionPolicy", "whether the snapshot-controller deletes the backend snapshot with the content; "+noDecision),
	inert(pAdmin, kVSC, "update spec.volumeSnapshotClassName", noDecision),
	inert(pAdmin, kVSC, "update spec.source", "immutable (the CRD's rule); a restore reads status.snapshotHandle"),
	inert(pAdmin, kVSC, "update spec.sourceVolumeMode", "immutable (the CRD's rule)"),
	moved(pAdmin, kVSC, "update status.snapshotHandle", "edit-content"),
	moved(pSnapCtrl, kVSC, "create", "snapshot-controller"),
	moved(pSnapCtrl, kVSC, "delete", "snapshot-controller"),
	moved(pSnapCtrl, kVSC, "update metadata.finalizers", "snapshot-controller"),
	moved(pSnapCtrl, kVSC, "update spec.volumeSnapshotRef", "snapshot-controller"),
	moved(pSnapCtrl, kVSC, "update status.snapshotHandle", "snapshot-controller"),

	moved(pTenant, kNS, "create", "create-namespace"),
	moved(pTenant, kNS, "delete at Active", "delete-namespace"),
	inert(pTenant, kNS, "delete at Terminating", "changes nothing: the API server keeps the first deletion"),
	inert(pAdmin, kNS, "update spec.finalizers", "the namespace controller's: hold a Terminating namespace until it is empty; "+noDecision),

	moved(pTenant, kSecret, "create", "create-namespace"),
	inert(pTenant, kSecret, "update immutable", noDecision),
	inert(pTenant, kSecret, "update data", "passed to the driver's calls as they are; no decision reads a secret's content"),
	inert(pTenant, kSecret, "update stringData", "write-only, into data; no decision reads a secret's content"),
	inert(pTenant, kSecret, "update type", "immutable (API validation)"),

	moved(pTenant, kPVC, "update spec.resources", "expand-claim"),
	moved(pTenant, kPVC, "update spec.volumeName", "set-volume-name"),
	moved(pTenant, kPVC, "update spec.volumeAttributesClassName", "edit-claim-vac"),
	moved(pAdmin, kPV, "update metadata.labels", "edit-unbound-pv"),
	moved(pAdmin, kPV, "update metadata.annotations", "edit-pv-meta"),
	moved(pAdmin, kPV, "update metadata.finalizers", "edit-pv-meta"),
	moved(pAdmin, kPV, "update spec.capacity", "edit-unbound-pv"),
	moved(pAdmin, kPV, "update spec.accessModes", "edit-unbound-pv"),
	moved(pAdmin, kPV, "update spec.storageClassName", "edit-unbound-pv"),
	moved(pAdmin, kPV, "update spec.volumeAttributesClassName", "edit-unbound-pv"),
	moved(pAdmin, kPV, "update spec.nodeAffinity", "edit-unbound-pv"),
	moved(pAdmin, kSC, "update allowedTopologies", "class-topology"),
	moved(pTenant, kSecret, "delete", "delete-secret"),
},
	inertAll(pAdmin, kPV, pvSource, "update spec.gcePersistentDisk", "update spec.awsElasticBlockStore", "update spec.hostPath",
		"update spec.glusterfs", "update spec.nfs", "update spec.rbd", "update spec.iscsi", "update spec.cinder", "update spec.cephfs",
		"update spec.fc", "update spec.flocker", "update spec.flexVolume", "update spec.azureFile", "update spec.vsphereVolume",
		"update spec.quobyte", "update spec.azureDisk", "update spec.photonPersistentDisk", "update spec.portworxVolume",
		"update spec.scaleIO", "update spec.local", "update spec.storageos", "update spec.csi"),
	inertAll(pTenant, kPVC, claimSpec, "update spec.accessModes", "update spec.selector", "update spec.volumeMode",
		"update spec.dataSource", "update spec.dataSourceRef"),
	inertAll(pAdmin, kSC, classSpec, "update provisioner", "update parameters", "update reclaimPolicy", "update volumeBindingMode"),
	inertAll(pAdmin, kNode, "networking's, the cloud provider's and the kubelet's; "+noDecision,
		"update spec.podCIDR", "update spec.podCIDRs", "update spec.providerID", "update spec.configSource", "update spec.externalID"),
	inertAll(pAdmin, kCSINode, noDecision+" (the provisioner reads a CSINode's drivers)",
		"update metadata.labels", "update metadata.annotations", "update metadata.finalizers"),
	inertAll(pAdmin, kVA, noDecision+" (the wait for detach reads spec.source.persistentVolumeName)",
		"update metadata.labels", "update metadata.annotations"),
	inertAll(pAdmin, kVA, vaSpec, "update spec.attacher", "update spec.source", "update spec.nodeName"),
	inertAll(pAdmin, kVAC, noDecision+" (the provisioner reads its driverName and parameters)",
		"update metadata.labels", "update metadata.annotations", "update metadata.finalizers"),
	inertAll(pAdmin, kVAC, vacSpec, "update driverName", "update parameters"),
	inertAll(pTenant, kVS, noDecision, "update metadata.labels"),
	inertAll(pAdmin, kVSC, noDecision, "update metadata.labels"),
	inertAll(pAdmin, kNS, noDecision+" (tether reads a namespace's deletion, and kube-system's UID, which admission never lets go)",
		"update metadata.labels", "update metadata.annotations", "update metadata.finalizers"),
	inertAll(pTenant, kSecret, noDecision+" (a secret is read by name, for its content)",
		"update metadata.labels", "update metadata.annotations", "update metadata.finalizers"),
)

// worldGaps are the verbs that can change a decision and that no move
// performs: TestWorldCoversTheAPI logs them. Each is a move to write.
var worldGaps = []verbRow{
	inert(pAdmin, kVSC, "create", "GAP: a pre-provisioned content made by hand for a snapshot; no move makes one (edit-content edits the controller's)"),
	inert(pAdmin, kVSC, "update metadata.annotations", "GAP: allow-volume-mode-change lets a restore change volume mode; no content of the world carries it"),
}
