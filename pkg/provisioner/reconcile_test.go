package provisioner

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
