package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestStoppedEarly(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	failed := errors.New("gave up waiting for the CSI driver")
	for _, tt := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"no error", ended, nil, false},
		{"an error while running", live, failed, false},
		{"an error once told to stop", ended, failed, true},
		{"the drain outlived its bound", ended, fmt.Errorf("provisioner: %w", ErrWorkNotStopped), false},
	} {
		if got := StoppedEarly(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: StoppedEarly = %v, want %v", tt.name, got, tt.want)
		}
	}
}
