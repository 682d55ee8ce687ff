package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"

	"github.com/tether-csi/tether/pkg/server"
)

// The switch to external-provisioner and KCM's binder and back
// (centralised mode), as docs/migration.md says: stop tether, run
// `provisioner --hand-back`, start EP and KCM's binder, run --hand-back
// again until it leaves nothing; and back: start tether again. EP is a
// model: the same library (library.go) calling a provisioner that keeps no
// record (CreateVolume by the claim's UID, the PV from its answer, no
// clones), after EP v6.4.0's provisioner where it matters here. KCM's
// binder is tether's binder without the record drop (binder.Options.KeepRecords):
// its decisions are the same for what the sim checks. EP's own leaks (a
// claim deleted while its CreateVolume goes on: EP#486) and EP's deletes
// are not tether's: volumes EP's calls make are left out of the leak
// checks, and its DeleteVolume calls out of the delete checks. What is
// checked is tether's side: its hand-back while the actors run, and what
// it does with what EP and KCM left once it is back.

// switchStack switches to EP and KCM, or back to tether.
func (w *World) switchStack() string {
	if !w.upstream {
		left := w.handBack()
		w.upstream = true
		w.handBackLeft = len(left) > 0
		w.standby = nil // tether's binder Deployment is gone
		w.startProvisioner(0)
		w.startBinder()
		return fmt.Sprintf("admin: switch to external-provisioner and KCM's binder (--hand-back left %v)", left)
	}
	w.upstream, w.handBackLeft = false, false
	w.startProvisioner(0)
	w.startBinder()
	return "admin: switch back to tether"
}

// handBackAgain runs --hand-back once more while EP and KCM run.
func (w *World) handBackAgain() string {
	left := w.handBack()
	w.handBackLeft = len(left) > 0
	return fmt.Sprintf("admin: --hand-back again: left %v", left)
}

// handBack runs `provisioner --hand-back` in a fresh tether process.
func (w *World) handBack() []string {
	p := w.newTether(0, true)
	p.caches.fill()
	w.who = "hand-back"
	defer func() { w.who = "" }()
	left, err := p.inflight.HandBack(w.ctx)
	if err != nil {
		w.tracef("  hand-back: %v", err)
	}
	return left
}

// newUpstream builds external-provisioner's process (its caches not
// filled yet).
func (w *World) newUpstream(int) *provProc {
	p := &provProc{w: w, name: "external-provisioner", work: &server.Work{}, upstream: true}
	p.drv = &driver{b: w.back, upstream: true}
	p.client = w.newClient(p.name)
	p.ifQ = newQueue(w, "ep-unused")
	p.cloneQ = newQueue(w, "ep-unused")
	p.snapQ = newQueue(w, "ep-unused")
	p.staticQ = newQueue(w, "ep-unused")
	p.caches = newCaches(w, rClaims, rVolumes, rClasses, rNodes, rCSINodes, rVAs, rVACs)
	p.nodeLister = corelisters.NewNodeLister(p.caches.inf[rNodes].indexer)
	p.lib = newLibrary(p, epProvisioner{p}, p.client)
	return p
}

// epProvisioner is the model of external-provisioner's provisioner.
type epProvisioner struct{ p *provProc }

func (epProvisioner) ShouldProvision(context.Context, *v1.PersistentVolumeClaim) bool { return true }
func (epProvisioner) ShouldDelete(context.Context, *v1.PersistentVolume) bool         { return true }

func (e epProvisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	claim, class := o.PVC, o.StorageClass
	if claim.Spec.DataSource != nil || claim.Spec.DataSourceRef != nil {
		return nil, controller.ProvisioningFinished, errors.New("the sim's external-provisioner does not clone")
	}
	req := &csi.CreateVolumeRequest{Name: o.PVName, Parameters: map[string]string{},
		CapacityRange: &csi.CapacityRange{RequiredBytes: claim.Spec.Resources.Requests.Storage().Value()}}
	for k, v := range class.Parameters {
		if !strings.HasPrefix(k, "csi.storage.k8s.io/") {
			req.Parameters[k] = v
		}
	}
	if name := claim.Spec.VolumeAttributesClassName; name != nil && *name != "" {
		obj, ok, _ := e.p.caches.inf[rVACs].indexer.GetByKey(*name)
		if !ok {
			return nil, controller.ProvisioningFinished, fmt.Errorf("volume attributes class %s not found", *name)
		}
		req.MutableParameters = maps.Clone(obj.(*storagev1.VolumeAttributesClass).Parameters)
	}
	resp, err := e.p.drv.CreateVolume(ctx, req)
	if err != nil {
		switch status.Code(err) {
		case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled, codes.Aborted, codes.ResourceExhausted:
			return nil, controller.ProvisioningInBackground, err
		}
		return nil, controller.ProvisioningFinished, err
	}
	policy := v1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		policy = *class.ReclaimPolicy
	}
	vol := resp.GetVolume()
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: *resource.NewQuantity(vol.GetCapacityBytes(), resource.BinarySI)},
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: policy,
			VolumeMode:                    claim.Spec.VolumeMode,
			VolumeAttributesClassName:     claim.Spec.VolumeAttributesClassName,
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: driverName, VolumeHandle: vol.GetVolumeId(), VolumeAttributes: maps.Clone(vol.GetVolumeContext())}},
		}}, controller.ProvisioningFinished, nil
}

func (e epProvisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	if pv.Spec.CSI == nil {
		return &controller.IgnoredError{Reason: "not a CSI volume"}
	}
	_, err := e.p.drv.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle})
	return err
}
