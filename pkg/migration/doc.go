// Package migration says which in-tree volume plugins are migrated to which
// CSI driver, and what that means for claims and volumes, as
// kube-controller-manager and external-provisioner read it. The plugin
// names and the translations come from k8s.io/csi-translation-lib; in
// Kubernetes 1.36 migration is on for every plugin it knows (the feature
// gates are locked), so "migratable" and "migrated" are the same here.
//
// The files:
//   - migration.go: the names both ways (CSIDriverFor, InTreeFor); a PV's
//     pv.kubernetes.io/migrated-to value (VolumeAnnotation), and
//     AnnealVolume, which sets or drops it and the in-tree deletion
//     finalizer as kube-controller-manager does, on a PV the caller has
//     copied (NeedsAnneal asks the same without a copy); and the
//     translations: TranslateClass (a class's parameters for the CSI
//     driver), ToInTree (the in-tree PV external-provisioner saves for a
//     migrated claim) and ToCSI (an in-tree PV's CSI form, for
//     DeleteVolume).
package migration
