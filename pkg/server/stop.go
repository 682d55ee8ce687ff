package server

import (
	"context"
	"errors"
)

// StoppedEarly reports whether err, returned by a command's run once its
// signal context ctx ended, only says that the run was cut short while it
// started (waiting for the CSI driver, the caches, the API server): the
// command was told to stop, which is no failure, and should exit 0
// without an error log, as the kubelet's SIGTERM expects. A drain that
// outlived its bound (ErrWorkNotStopped) stays a failure: work was left
// under way.
func StoppedEarly(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && !errors.Is(err, ErrWorkNotStopped)
}
