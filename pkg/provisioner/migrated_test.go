package provisioner

import (
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// ebsDriver is a provisioner of ebs.csi.aws.com, which takes over the
// in-tree kubernetes.io/aws-ebs plugin.
func ebsDriver() envOpt {
	return func(o *Options) {
		o.Driver.(*fakeDriver).name = "ebs.csi.aws.com"
		o.MigratedFrom = "kubernetes.io/aws-ebs"
	}
}

// A claim of an in-tree class (gp2) migrated to the driver is provisioned
// with the translated parameters and saved as an in-tree PV, and that PV
// is deleted through the driver, as external-provisioner does.
func TestMigratedClaim(t *testing.T) {
	e := newEnv(t, ebsDriver())
	e.class = &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: testClass}, Provisioner: "kubernetes.io/aws-ebs",
		Parameters: map[string]string{"type": "gp3", "fsType": "xfs"}}
	e.createClaim(newClaim())
	pv, _, err := e.provision(e.cachedClaim(testClaim))
	if err != nil {
		t.Fatal(err)
	}
	req := e.driver.creates[0]
	if req.Parameters["type"] != "gp3" || req.VolumeCapabilities[0].GetMount().GetFsType() != "xfs" {
		t.Errorf("CreateVolume parameters %v, capabilities %v: not translated", req.Parameters, req.VolumeCapabilities)
	}
	if pv.Spec.CSI != nil || pv.Spec.AWSElasticBlockStore == nil || pv.Spec.AWSElasticBlockStore.VolumeID != "h-"+testVolume {
		t.Fatalf("the PV is not the in-tree one EP saves: %+v", pv.Spec.PersistentVolumeSource)
	}
	// The binder (ours or KCM's) annotates it; then it is ours to delete.
	metav1.SetMetaDataAnnotation(&pv.ObjectMeta, storagehelpers.AnnMigratedTo, "ebs.csi.aws.com")
	if !e.p.ShouldDelete(e.ctx, pv) {
		t.Fatal("ShouldDelete refuses the migrated in-tree PV")
	}
	e.savePV(pv)
	if err := e.p.Delete(e.ctx, pv); err != nil {
		t.Fatal(err)
	}
	if vols := e.driver.volumes(); len(vols) != 0 {
		t.Errorf("backend volumes left: %v", vols)
	}
	// An in-tree PV of another plugin, or not migrated to us, is not ours.
	other := pv.DeepCopy()
	other.Annotations[storagehelpers.AnnMigratedTo] = "pd.csi.storage.gke.io"
	if e.p.ShouldDelete(e.ctx, other) {
		t.Error("ShouldDelete takes an in-tree PV migrated to another driver")
	}
}
