// Package request is the pure translation between Kubernetes objects and
// CSI: a claim and its StorageClass (parameters, secrets, topology, data
// source, VolumeAttributesClass) to a CreateVolumeRequest, and the driver's
// answer to the PV that is saved for it. Its functions read nothing and
// write nothing: the provisioner gathers their inputs (from caches and the
// API server) and carries out their outputs. The same functions build the
// request of a claim's first CreateVolume and of the repeated one that
// finds a deleted claim's volume again, so that the two cannot differ.
//
// Map:
//   - params.go: a class's parameters (ParseClassParams), the reserved
//     keys and the secrets a class names.
//   - secrets.go: secret templates resolved for a claim (ResolveSecret),
//     and the deletion secret a PV carries (DeletionSecretRef).
//   - topology.go: the accessibility requirement (Requirement) from the
//     class's allowed topologies, the selected node and the cluster's
//     registered segments.
//   - source.go: a claim's data source (DataSourceOf) and the checks of a
//     restore and a clone.
//   - vac.go: what a VolumeAttributesClass adds, and the claims no
//     provisioner can serve (Supported).
//   - request.go: the volume's name (VolumeName) and the request (Build).
//   - owner.go: the ownership mark a request carries (OwnerMark) and the
//     class's reclaim policy.
//   - pv.go: the PV built from the driver's answer (BuildPV).
package request
