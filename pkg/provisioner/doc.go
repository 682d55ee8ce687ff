// Package provisioner is tether's CSI provisioner: the
// sig-storage-lib-external-provisioner Provisioner that turns a claim into a
// CreateVolume (its request built by package request) and a PV, with a
// durable record of volumes in flight on the claim.
package provisioner
