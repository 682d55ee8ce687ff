package main

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/internal/cli"
	"github.com/tether-csi/tether/pkg/provisioner"
)

// errRecordsLeft makes --hand-back exit with status 3: run it again once
// the upstream pair has provisioned the claims it names.
var errRecordsLeft = errors.New("claims still hold the in-flight record")

// handBack is --hand-back: settle the in-flight records once, for a switch
// back to external-provisioner and KCM's binder (docs/migration.md).
func handBack(ctx context.Context, start func(context.Context), r *provisioner.InFlight, synced ...cache.InformerSynced) error {
	start(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	left, err := r.HandBack(ctx)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	if len(left) > 0 {
		logger.Info("Claims still waiting for their volume keep the in-flight record; run --hand-back again once they are bound", "claims", left)
		return fmt.Errorf("%w: %d (%v)", errRecordsLeft, len(left), left)
	}
	logger.Info("No claim holds the in-flight record: the upstream pair can take over")
	return nil
}

// exitCode is the process's exit status for run's error.
func exitCode(err error) int {
	if errors.Is(err, errRecordsLeft) {
		return 3
	}
	return cli.ExitFailed
}
