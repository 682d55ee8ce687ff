package cluster

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"

	tcsi "github.com/tether-csi/tether/pkg/csi"
)

// DriverVolumes lists every volume a CSI driver has, through its socket,
// following ListVolumes pages.
func DriverVolumes(ctx context.Context, socket string) ([]*csi.Volume, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := tcsi.Connect(ctx, tcsi.Options{Address: socket})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var out []*csi.Volume
	token := ""
	for {
		resp, err := conn.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.Entries {
			out = append(out, e.GetVolume())
		}
		if token = resp.NextToken; token == "" {
			return out, nil
		}
	}
}

// PVNode is the node a PV's required node affinity names, "" if none.
func PVNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}
