package migration

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

func TestNames(t *testing.T) {
	tests := []struct {
		plugin, driver string
		migrated       bool
	}{
		{"kubernetes.io/aws-ebs", "ebs.csi.aws.com", true},
		{"kubernetes.io/gce-pd", "pd.csi.storage.gke.io", true},
		{"kubernetes.io/azure-disk", "disk.csi.azure.com", true},
		{"kubernetes.io/azure-file", "file.csi.azure.com", true},
		{"kubernetes.io/cinder", "cinder.csi.openstack.org", true},
		{"kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com", true},
		{"kubernetes.io/portworx-volume", "pxd.portworx.com", true},
		{"kubernetes.io/no-provisioner", "", false},
		{"csi.tether.dev", "", false},
	}
	for _, tt := range tests {
		driver, ok := CSIDriverFor(tt.plugin)
		if ok != tt.migrated || driver != tt.driver {
			t.Errorf("CSIDriverFor(%q) = %q %v, want %q %v", tt.plugin, driver, ok, tt.driver, tt.migrated)
		}
		if tt.migrated {
			if plugin, ok := InTreeFor(tt.driver); !ok || plugin != tt.plugin {
				t.Errorf("InTreeFor(%q) = %q %v", tt.driver, plugin, ok)
			}
		}
	}
	if _, ok := InTreeFor("csi.tether.dev"); ok {
		t.Error("a CSI driver with no in-tree twin is taken for a migrated one")
	}
}

func TestAnnealVolume(t *testing.T) {
	pv := func(provisionedBy, migratedTo string, finalizers ...string) *v1.PersistentVolume {
		p := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Annotations: map[string]string{}, Finalizers: finalizers}}
		if provisionedBy != "" {
			p.Annotations[storagehelpers.AnnDynamicallyProvisioned] = provisionedBy
		}
		if migratedTo != "" {
			p.Annotations[storagehelpers.AnnMigratedTo] = migratedTo
		}
		return p
	}
	inTree := storagehelpers.PVDeletionInTreeProtectionFinalizer
	tests := []struct {
		name       string
		pv         *v1.PersistentVolume
		changed    bool
		migrated   string
		finalizers []string
	}{
		{"gp2 volume: annotated", pv("kubernetes.io/aws-ebs", ""), true, "ebs.csi.aws.com", nil},
		{"gp2 volume annotated already", pv("kubernetes.io/aws-ebs", "ebs.csi.aws.com"), false, "ebs.csi.aws.com", nil},
		{"gp2 volume with the in-tree finalizer: dropped", pv("kubernetes.io/aws-ebs", "ebs.csi.aws.com", inTree, "x"), true, "ebs.csi.aws.com", []string{"x"}},
		{"CSI volume: nothing", pv("csi.tether.dev", ""), false, "", nil},
		{"static volume: nothing", pv("", ""), false, "", nil},
		{"a wrong annotation on a CSI volume: removed", pv("csi.tether.dev", "ebs.csi.aws.com"), true, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AnnealVolume(tt.pv); got != tt.changed {
				t.Errorf("changed %v, want %v", got, tt.changed)
			}
			if got := tt.pv.Annotations[storagehelpers.AnnMigratedTo]; got != tt.migrated {
				t.Errorf("migrated-to %q, want %q", got, tt.migrated)
			}
			if !slices.Equal(tt.pv.Finalizers, tt.finalizers) {
				t.Errorf("finalizers %v, want %v", tt.pv.Finalizers, tt.finalizers)
			}
		})
	}
}

// The translations are csi-translation-lib's; these rows only check that
// the wrappers hand over the right things.
func TestTranslations(t *testing.T) {
	logger := klog.Background()
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp2"}, Provisioner: "kubernetes.io/aws-ebs",
		Parameters: map[string]string{"type": "gp2", "fsType": "xfs"}}
	csiClass, err := TranslateClass(logger, class)
	if err != nil {
		t.Fatal(err)
	}
	if csiClass.Parameters["csi.storage.k8s.io/fstype"] != "xfs" || csiClass.Parameters["type"] != "gp2" {
		t.Errorf("translated parameters %v", csiClass.Parameters)
	}
	csiPV := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"}, Spec: v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0123", FSType: "xfs"}}}}
	inTree, err := ToInTree(csiPV)
	if err != nil {
		t.Fatal(err)
	}
	if inTree.Spec.CSI != nil || inTree.Spec.AWSElasticBlockStore == nil || inTree.Spec.AWSElasticBlockStore.VolumeID != "vol-0123" {
		t.Fatalf("in-tree PV %+v", inTree.Spec.PersistentVolumeSource)
	}
	back, err := ToCSI(logger, inTree)
	if err != nil {
		t.Fatal(err)
	}
	if back.Spec.CSI == nil || back.Spec.CSI.Driver != "ebs.csi.aws.com" || back.Spec.CSI.VolumeHandle != "vol-0123" {
		t.Errorf("CSI PV %+v", back.Spec.PersistentVolumeSource)
	}
}
