package provisioner

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
)

// create is Provision's CreateVolume for a claim that carries its record.
// A failure's outcome (Classify) is the library's state; a Reschedule
// also hands the claim back to the scheduler (records.Writer.Reschedule),
// and an Infeasible one starts the claim's wait for an edit
// (answeredInfeasible).
// The record stays, whatever the error: this call made nothing, but an
// earlier one may have (it timed out, then the driver answers
// AlreadyExists to a changed request, or ResourceExhausted). It goes with
// the claim's PV, or with the clean-up (at once, without a driver call,
// when every call answered final: createAnswers).
func (p *Provisioner) create(ctx context.Context, claim *v1.PersistentVolumeClaim, name string, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, controller.ProvisioningState, error) {
	shape := p.shape(claim)
	resp, err := p.createVolume(ctx, claim.UID, req)
	if err == nil {
		p.infeasible.memo.forget(claim.UID)
		return resp, controller.ProvisioningFinished, nil
	}
	logger := klog.FromContext(ctx)
	_, nodeSelected := claim.Annotations[storagehelpers.AnnSelectedNode]
	// As EP: ResourceExhausted on a selected node reschedules only for a
	// driver that takes topology; for others the node did not matter.
	outcome := Classify(err, nodeSelected && p.o.Topology)
	logger.Info("CreateVolume failed", "volume", name, "outcome", outcome.String(), "nodeSelected", nodeSelected, "err", err)
	p.answeredInfeasible(ctx, claim, shape, outcome, err)
	if outcome == Reschedule {
		if rerr := p.record.Reschedule(ctx, claim); rerr != nil {
			logger.Error(rerr, "Removing the selected node")
		}
	}
	return nil, outcome.State(), fmt.Errorf("CreateVolume %s: %w", name, err)
}

// createVolume is every CreateVolume made for a claim (provisioning, and a
// clean-up's repeat): its answer is noted in createAnswers.
func (p *Provisioner) createVolume(ctx context.Context, uid types.UID, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	resp, err := p.o.Driver.CreateVolume(ctx, req)
	p.answers.answered(uid, err, p.now())
	return resp, err
}
