package migration

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	csitrans "k8s.io/csi-translation-lib"
	"k8s.io/klog/v2"
)

var translator = csitrans.New()

// CSIDriverFor returns the CSI driver an in-tree plugin (a StorageClass's
// provisioner such as kubernetes.io/aws-ebs) is migrated to.
func CSIDriverFor(inTreePlugin string) (string, bool) {
	if !translator.IsMigratableIntreePluginByName(inTreePlugin) {
		return "", false
	}
	driver, err := translator.GetCSINameFromInTreeName(inTreePlugin)
	return driver, err == nil && driver != ""
}

// InTreeFor returns the in-tree plugin that a CSI driver takes over.
func InTreeFor(driver string) (string, bool) {
	if !translator.IsMigratedCSIDriverByName(driver) {
		return "", false
	}
	plugin, err := translator.GetInTreeNameFromCSIName(driver)
	return plugin, err == nil && plugin != ""
}

// VolumeAnnotation is the pv.kubernetes.io/migrated-to value a volume
// should carry: the CSI driver its provisioner (provisioned-by) is
// migrated to, "" for none. Statically made volumes carry none, as in
// kube-controller-manager.
func VolumeAnnotation(pv *v1.PersistentVolume) string {
	driver, _ := CSIDriverFor(pv.Annotations[storagehelpers.AnnDynamicallyProvisioned])
	return driver
}

// AnnealVolume sets or removes pv.kubernetes.io/migrated-to on a volume as
// kube-controller-manager does, and drops the in-tree deletion finalizer
// of a migrated volume (its deletion is the CSI provisioner's). It changes
// pv in place (call it on a copy) and reports whether it changed it.
func AnnealVolume(pv *v1.PersistentVolume) bool {
	a := annealingOf(pv)
	switch {
	case a.set != "":
		metav1.SetMetaDataAnnotation(&pv.ObjectMeta, storagehelpers.AnnMigratedTo, a.set)
	case a.drop:
		delete(pv.Annotations, storagehelpers.AnnMigratedTo)
	}
	if a.unfinalize {
		pv.Finalizers = slices.DeleteFunc(pv.Finalizers, func(f string) bool { return f == storagehelpers.PVDeletionInTreeProtectionFinalizer })
	}
	return a.changes()
}

// NeedsAnneal reports whether AnnealVolume would change pv, leaving pv as
// it is (no copy needed).
func NeedsAnneal(pv *v1.PersistentVolume) bool { return annealingOf(pv).changes() }

// annealing is what AnnealVolume changes: the migrated-to value to set,
// or that it goes (a rollback: the provisioner is no longer migrated), and
// whether the in-tree deletion finalizer goes.
type annealing struct {
	set              string
	drop, unfinalize bool
}

func (a annealing) changes() bool { return a.set != "" || a.drop || a.unfinalize }

func annealingOf(pv *v1.PersistentVolume) annealing {
	var a annealing
	want, have := VolumeAnnotation(pv), pv.Annotations[storagehelpers.AnnMigratedTo]
	switch {
	case want != "" && have != want:
		a.set = want
	case want == "" && have != "" && metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned):
		a.drop = true
	}
	a.unfinalize = want != "" && slices.Contains(pv.Finalizers, storagehelpers.PVDeletionInTreeProtectionFinalizer)
	return a
}

// TranslateClass returns the CSI form of a StorageClass of an in-tree
// plugin (its parameters translated for the CSI driver).
func TranslateClass(logger klog.Logger, class *storagev1.StorageClass) (*storagev1.StorageClass, error) {
	return translator.TranslateInTreeStorageClassToCSI(logger, class.Provisioner, class)
}

// ToInTree turns a CSI PV of a migrated driver into the in-tree PV that
// external-provisioner saves for a migrated claim.
func ToInTree(pv *v1.PersistentVolume) (*v1.PersistentVolume, error) {
	return translator.TranslateCSIPVToInTree(pv)
}

// ToCSI turns an in-tree PV of a migrated plugin into its CSI form (for
// DeleteVolume); a CSI PV is returned as it is.
func ToCSI(logger klog.Logger, pv *v1.PersistentVolume) (*v1.PersistentVolume, error) {
	if pv.Spec.CSI != nil {
		return pv, nil
	}
	return translator.TranslateInTreePVToCSI(logger, pv)
}
