package provisioner

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOwnsVolumeOf(t *testing.T) {
	onNode := func(node string) *v1.PersistentVolumeClaim {
		c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
		if node != "" {
			c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": node}
		}
		return c
	}
	central := &Provisioner{}
	node1 := &Provisioner{o: Options{Node: &NodeDeployment{NodeName: "node-1"}}}
	tests := []struct {
		name  string
		p     *Provisioner
		claim *v1.PersistentVolumeClaim
		want  bool
	}{
		{"centralised provisioner, any claim", central, onNode("node-2"), true},
		{"centralised provisioner, no node", central, onNode(""), true},
		{"node mode, this node's claim", node1, onNode("node-1"), true},
		{"node mode, another node's claim (the chaos leak)", node1, onNode("node-2"), false},
		{"node mode, no selected node", node1, onNode(""), false},
	}
	for _, tt := range tests {
		if got := tt.p.ownsVolumeOf(tt.claim); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestVolumeAbsent(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{status.Error(codes.InvalidArgument, "bad"), true},
		{status.Error(codes.ResourceExhausted, "full"), true},
		{status.Error(codes.AlreadyExists, "other parameters"), false},
		{status.Error(codes.DeadlineExceeded, "slow"), false},
		{status.Error(codes.Unavailable, "gone"), false},
		{errors.New("not gRPC"), false},
	}
	for _, tt := range tests {
		if got := volumeAbsent(tt.err); got != tt.want {
			t.Errorf("volumeAbsent(%v) = %v, want %v", tt.err, got, tt.want)
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
