package gogc

import (
	"context"
	"log/slog"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
)

// MemoryRatio is the share of the container's memory limit the Go runtime
// aims to stay under (its soft limit, GOMEMLIMIT). The rest is left to what
// the runtime does not count: the binary's pages, which the kernel charges
// to the container too and can reclaim.
const MemoryRatio = 0.9

// MemoryRefresh is how often MemoryLimit reads the limit again: a pod's
// memory limit may be resized in place (Kubernetes 1.35).
const MemoryRefresh = time.Minute

// MemoryLimit sets the runtime's soft memory limit to MemoryRatio of what
// limit reports (memlimit.FromCgroup: the container's
// resources.limits.memory), and keeps it so until ctx ends, unless the
// environment sets GOMEMLIMIT (or AUTOMEMLIMIT=off, or another ratio in
// AUTOMEMLIMIT). Near its limit a process then collects more often rather
// than being killed. No limit sets none. It returns the limit set (math.MaxInt64
// for none); an error is logged and leaves the runtime as it was.
func MemoryLimit(ctx context.Context, logger logr.Logger, limit memlimit.Provider) int64 {
	set, _ := memlimit.Set(
		memlimit.WithProvider(limit),
		memlimit.WithRatio(MemoryRatio),
		memlimit.WithLogger(slog.New(logr.ToSlogHandler(logger))),
		memlimit.WithRefreshInterval(ctx, MemoryRefresh),
	)
	return set
}
