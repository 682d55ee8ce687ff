package provisioner

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/apimachinery/pkg/types"
)

// createVolume is every CreateVolume made for a claim (provisioning, and a
// clean-up's repeat): its answer is noted in createAnswers.
func (p *Provisioner) createVolume(ctx context.Context, uid types.UID, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	resp, err := p.o.Driver.CreateVolume(ctx, req)
	p.answers.answered(uid, err, p.now())
	return resp, err
}
