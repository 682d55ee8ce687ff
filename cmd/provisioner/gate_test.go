package main

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/provisioner"
	"github.com/tether-csi/tether/pkg/server"
)

// Once the work stops, no CSI call and no Provision or Delete starts; a
// refused CreateVolume counts as one that may have started (the claim keeps
// its in-flight record), and the library ignores a refused Provision or
// Delete (no event, no retry in this process).
func TestGatesRefuseOnceStopped(t *testing.T) {
	calls := &server.Calls{}
	calls.Close()
	d := gatedDriver{calls: calls} // a call that got through would use the nil connection
	if _, err := d.CreateVolume(t.Context(), nil); !errors.Is(err, errStopping) {
		t.Errorf("CreateVolume after stop = %v, want %v", err, errStopping)
	}
	if _, err := d.DeleteVolume(t.Context(), nil); !errors.Is(err, errStopping) {
		t.Errorf("DeleteVolume after stop = %v, want %v", err, errStopping)
	}
	if got := provisioner.Classify(errStopping, false); got != provisioner.InBackground {
		t.Errorf("a refused CreateVolume is classified %v, want %v (the record must stay)", got, provisioner.InBackground)
	}
	p := gatedProvisioner{calls: calls}
	var ignored *controller.IgnoredError
	if _, _, err := p.Provision(t.Context(), controller.ProvisionOptions{}); !errors.As(err, &ignored) {
		t.Errorf("Provision after stop = %v, want an IgnoredError", err)
	}
	if err := p.Delete(t.Context(), &v1.PersistentVolume{}); !errors.As(err, &ignored) {
		t.Errorf("Delete after stop = %v, want an IgnoredError", err)
	}
	if n := calls.InProgress(); n != 0 {
		t.Errorf("%d calls counted in progress after refusals", n)
	}
}
