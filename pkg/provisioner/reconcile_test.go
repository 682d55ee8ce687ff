package provisioner

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-csi/tether/pkg/inflight"
)

func TestOwnerOf(t *testing.T) {
	claim := func(selected, recorded string) *v1.PersistentVolumeClaim {
		c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{}}}
		if selected != "" {
			c.Annotations["volume.kubernetes.io/selected-node"] = selected
		}
		if recorded != "" {
			c.Annotations[inflight.AnnNode] = recorded
		}
		return c
	}
	central := &Provisioner{}
	node1 := &Provisioner{o: Options{Node: &NodeDeployment{NodeName: "node-1"}}}
	tests := []struct {
		name  string
		p     *Provisioner
		claim *v1.PersistentVolumeClaim
		owner recordOwner
		moved bool
	}{
		{"centralised provisioner, any claim", central, claim("node-2", ""), ownedHere, false},
		{"centralised provisioner, no node", central, claim("", ""), ownedHere, false},
		{"node mode, this node's record", node1, claim("node-1", "node-1"), ownedHere, false},
		{"node mode, this node's record, claim rescheduled", node1, claim("", "node-1"), ownedHere, true},
		{"node mode, this node's record, claim now on node-2", node1, claim("node-2", "node-1"), ownedHere, true},
		{"node mode, an older record: the selected node's", node1, claim("node-1", ""), ownedHere, false},
		{"node mode, another node's record (the chaos leak)", node1, claim("node-1", "node-2"), ownedElsewhere, false},
		{"node mode, an older record of another node", node1, claim("node-2", ""), ownedElsewhere, false},
		{"node mode, no node at all", node1, claim("", ""), ownedByNone, false},
	}
	for _, tt := range tests {
		if owner, moved := tt.p.ownerOf(tt.claim); owner != tt.owner || moved != tt.moved {
			t.Errorf("%s: got %v %v, want %v %v", tt.name, owner, moved, tt.owner, tt.moved)
		}
	}
}

// TestNoVolumeMade: which CreateVolume answers prove that no volume of
// the name exists, for the clean-up's repeat and for createAnswers.
func TestNoVolumeMade(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{status.Error(codes.InvalidArgument, "bad"), true},
		{status.Error(codes.NotFound, "no such source"), true},
		{status.Error(codes.OutOfRange, "too large"), true},
		{status.Error(codes.Internal, "refused"), true},
		{status.Error(codes.ResourceExhausted, "full"), false},
		{status.Error(codes.AlreadyExists, "other parameters"), false},
		{status.Error(codes.DeadlineExceeded, "slow"), false},
		{status.Error(codes.Unavailable, "gone"), false},
		{status.Error(codes.Aborted, "in progress"), false},
		{status.Error(codes.Canceled, "cancelled"), false},
		{errors.New("not gRPC"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := noVolumeMade(tt.err); got != tt.want {
			t.Errorf("noVolumeMade(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestSettleWait(t *testing.T) {
	saved := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", CreationTimestamp: metav1.NewTime(saved)}}
	claim := func(volumeName string, deleting bool) *v1.PersistentVolumeClaim {
		c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1.PersistentVolumeClaimSpec{VolumeName: volumeName}}
		if deleting {
			c.DeletionTimestamp = &metav1.Time{Time: saved}
		}
		return c
	}
	tests := []struct {
		name  string
		claim *v1.PersistentVolumeClaim
		now   time.Time
		want  time.Duration
	}{
		{"just saved, not bound: left for the binder", claim("", false), saved.Add(time.Second), binderGrace - time.Second},
		{"grace over", claim("", false), saved.Add(binderGrace), 0},
		{"long after", claim("", false), saved.Add(time.Hour), 0},
		{"bound by a binder that left the record", claim("pvc-1", false), saved, 0},
		{"claim being deleted", claim("", true), saved, 0},
	}
	for _, tt := range tests {
		if got := settleWait(tt.claim, pv, tt.now); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
