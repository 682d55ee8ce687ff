package provisioner

import (
	"context"
	"fmt"

	"github.com/tether-csi/tether/pkg/inflight"
	"github.com/tether-csi/tether/pkg/provisioner/protect"
	"github.com/tether-csi/tether/pkg/provisioner/records"
	v1 "k8s.io/api/core/v1"
)

// beforeCreate makes what must hold before Provision's CreateVolume hold,
// in this order: no other node's record waits on the claim; the claim
// carries the in-flight record for name (records.Writer); this process
// has noted the record it wrote and the secret the call is given
// (memo.go); the data source carries its protection (package protect). It
// returns the claim as the record's write left it. On an error no
// CreateVolume may be made now; the library tries again.
func (p *Provisioner) beforeCreate(ctx context.Context, claim *v1.PersistentVolumeClaim, name string, prep *prepared) (*v1.PersistentVolumeClaim, error) {
	if node := records.ElsewhereNode(claim, p.nodeName()); node != "" {
		return nil, fmt.Errorf("waiting for the provisioner of node %s to clean up the volume it may have made for the claim before it was rescheduled", node)
	}
	fresh := !inflight.Holds(claim)
	claim, err := p.record.Record(ctx, claim, name)
	if err != nil {
		return nil, err
	}
	if fresh {
		p.answers.recorded(claim.UID, p.now())
	}
	p.secretsUsed.remember(claim.UID, prep.req.Secrets, p.now())
	if err := p.protect(ctx, prep.source); err != nil {
		return nil, err
	}
	return claim, nil
}

// protect puts the source's finalizer on it, through package protect, the
// one writer of the source-protection finalizers.
func (p *Provisioner) protect(ctx context.Context, src *dataSource) error {
	switch {
	case src == nil:
		return nil
	case src.claim != nil:
		return protect.Clone(ctx, p.o.Client, src.claim)
	case src.snapshot != nil:
		return protect.Snapshot(ctx, p.o.SnapshotClient, src.snapshot)
	}
	return nil
}
