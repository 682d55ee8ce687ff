package provisioner

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/nodeloss"
)

func TestShouldProvision(t *testing.T) {
	forDriver := claimAnn(storagehelpers.AnnStorageProvisioner, driverNm)
	tests := []struct {
		name  string
		opts  []envOpt
		claim *v1.PersistentVolumeClaim
		want  bool
	}{
		{"a claim for the driver", nil, newClaim(forDriver), true},
		{"the beta annotation", nil, newClaim(claimAnn(storagehelpers.AnnBetaStorageProvisioner, driverNm)), true},
		{"migrated to the driver", nil, newClaim(claimAnn(storagehelpers.AnnStorageProvisioner, "kubernetes.io/aws-ebs"), claimAnn(storagehelpers.AnnMigratedTo, driverNm)), true},
		{"another provisioner's claim", nil, newClaim(claimAnn(storagehelpers.AnnStorageProvisioner, "other.csi")), false},
		{"no provisioner annotation (a static class)", nil, newClaim(), false},
		{"being deleted", nil, newClaim(forDriver, func(c *v1.PersistentVolumeClaim) { now := metav1.Now(); c.DeletionTimestamp = &now }), false},
		{"node mode: this node's claim", []envOpt{nodeMode("node-1")}, newClaim(forDriver, claimAnn(storagehelpers.AnnSelectedNode, "node-1")), true},
		{"node mode: another node's claim", []envOpt{nodeMode("node-1")}, newClaim(forDriver, claimAnn(storagehelpers.AnnSelectedNode, "node-2")), false},
		// The bug: node-mode provisioners set selected-node on claims of
		// other provisioners (here: none) of Immediate classes.
		{"node mode: an Immediate claim of another provisioner is not owned", []envOpt{nodeMode("node-1"), immediateBinding()}, newClaim(), false},
		{"node mode: an Immediate claim left to a volume populator is not owned", []envOpt{nodeMode("node-1"), immediateBinding()},
			newClaim(forDriver, func(c *v1.PersistentVolumeClaim) {
				group := "hello.example.com"
				c.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: &group, Kind: "Hello", Name: "x"}
			}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.opts...)
			claim := e.createClaim(tt.claim)
			if got := e.p.ShouldProvision(e.ctx, claim); got != tt.want {
				t.Errorf("ShouldProvision = %v, want %v", got, tt.want)
			}
			// An ownership attempt is scheduled synchronously: none may be.
			e.p.owners.mu.Lock()
			defer e.p.owners.mu.Unlock()
			if e.p.owners.pending[string(claim.UID)] {
				t.Error("an attempt to own the claim (set its selected node) was scheduled")
			}
		})
	}
}

// With a claim for the driver, the same node-mode provisioner does try to
// own it (the row above is not vacuous).
func TestShouldProvisionOwnsImmediateClaims(t *testing.T) {
	e := newEnv(t, nodeMode("node-1"), immediateBinding())
	claim := e.createClaim(newClaim(claimAnn(storagehelpers.AnnStorageProvisioner, driverNm)))
	if e.p.ShouldProvision(e.ctx, claim) {
		t.Error("ShouldProvision before the claim is owned")
	}
	e.p.owners.mu.Lock()
	defer e.p.owners.mu.Unlock()
	if !e.p.owners.pending[string(claim.UID)] {
		t.Error("no attempt to own an Immediate claim of the driver")
	}
}

// A PV whose claim the binder released for node loss never gets a
// DeleteVolume: ShouldDelete refuses it, and Delete, which reads the PV
// again, refuses it when only the API server's copy carries the mark.
func TestNodeLossReleasedNotDeleted(t *testing.T) {
	e := newEnv(t)
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-gone", UID: "pv-uid",
		Annotations: map[string]string{storagehelpers.AnnDynamicallyProvisioned: driverNm}},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driverNm, VolumeHandle: "h-gone"}}},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeReleased}}
	if !e.p.ShouldDelete(e.ctx, pv) {
		t.Fatal("ShouldDelete refuses an ordinary Released PV")
	}
	marked := pv.DeepCopy()
	marked.Annotations[nodeloss.AnnReleased] = "2026-03-01T12:00:00Z"
	if e.p.ShouldDelete(e.ctx, marked) {
		t.Error("ShouldDelete takes a PV released for node loss")
	}
	e.savePV(marked)
	err := e.p.Delete(e.ctx, pv) // the library's copy, older than the mark
	var ignored *controller.IgnoredError
	if !errors.As(err, &ignored) {
		t.Errorf("Delete of a PV whose API copy is released for node loss = %v, want an IgnoredError", err)
	}
	if n := len(e.driver.deletes); n != 0 {
		t.Errorf("%d DeleteVolume calls", n)
	}
}
