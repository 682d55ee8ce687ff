package provisioner

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tether-csi/tether/pkg/inflight"
)

// TestFinalCreateErrorClassDeleted is issue 33's defect 7: the driver
// refuses a claim for good (a block volume it does not support), and the
// claim is deleted together with its StorageClass, as a test suite's
// namespace is. Every CreateVolume under the record this process wrote
// answered a final code, so no volume can exist: the record goes at the
// first settle, with no driver call, no DeleteVolume and no
// VolumeCleanupAbandoned. Any answer that may have left a volume (or a
// record this process did not write from none) keeps today's clean-up,
// which needs the class: it retries, then gives the volume up on record
// after abandonGrace.
func TestFinalCreateErrorClassDeleted(t *testing.T) {
	refused := status.Error(codes.InvalidArgument, "block volumes are not supported")
	tests := []struct {
		name string
		// answers are the CreateVolume answers, one Provision each (made:
		// the driver makes the volume before it answers).
		answers []error
		made    bool
		// restart: the provisioner restarts before the claim's deletion;
		// forged: the claim carries a record when it is made.
		restart, forged bool
		// prompt: the record goes at the first settle, without a driver call.
		prompt bool
	}{
		{name: "InvalidArgument", answers: []error{refused}, prompt: true},
		{name: "InvalidArgument on every retry", answers: []error{refused, refused, refused}, prompt: true},
		{name: "NotFound (the source is gone)", answers: []error{status.Error(codes.NotFound, "no such snapshot")}, prompt: true},
		{name: "Internal", answers: []error{status.Error(codes.Internal, "refused")}, prompt: true},
		{name: "DeadlineExceeded, nothing made", answers: []error{timeoutErr}},
		{name: "DeadlineExceeded, then InvalidArgument", answers: []error{timeoutErr, refused}},
		{name: "Unavailable", answers: []error{status.Error(codes.Unavailable, "driver restarting")}},
		{name: "Aborted", answers: []error{status.Error(codes.Aborted, "in progress")}},
		{name: "ResourceExhausted", answers: []error{status.Error(codes.ResourceExhausted, "pool full")}},
		{name: "AlreadyExists", answers: []error{status.Error(codes.AlreadyExists, "other parameters")}},
		{name: "not a gRPC status", answers: []error{errors.New("connection reset")}},
		{name: "InvalidArgument, then a restart: the new process does not know", answers: []error{refused}, restart: true},
		{name: "InvalidArgument on a record the claim came with (forged, or an earlier process's)", answers: []error{refused}, forged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			claim := newClaim(volumeMode("Block"))
			if tt.forged {
				inflight.Record(claim, driverNm, testVolume)
			}
			e.createClaim(claim)
			for _, answer := range tt.answers {
				e.driver.fail = answer
				if _, _, err := e.provision(e.cachedClaim(testClaim)); err == nil {
					t.Fatal("Provision succeeded")
				}
				e.refresh()
			}
			if !e.holdsRecord(testClaim) {
				t.Fatal("the record went with the failed CreateVolume")
			}
			if tt.restart {
				e.restart()
			}
			creates := e.driver.createCount()
			e.driver.fail = refused // what a clean-up's repeat would get
			e.deleteClaim(testClaim)
			e.deleteClass()
			e.refresh()
			err := e.r.Reconcile(e.ctx, testNS+"/"+testClaim)
			if tt.prompt {
				if err != nil {
					t.Fatalf("settle: %v", err)
				}
				e.check(want{gone: true})
				if n := e.driver.createCount() - creates; n != 0 || len(e.driver.deletes) != 0 {
					t.Errorf("the clean-up called the driver: %d CreateVolume, DeleteVolume %v", n, e.driver.deletes)
				}
				if evs := e.events(); slices.ContainsFunc(evs, func(ev string) bool {
					return strings.Contains(ev, ReasonVolumeCleanupAbandoned) || strings.Contains(ev, "ProvisioningCleanupFailed")
				}) {
					t.Errorf("events %v", evs)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "StorageClass") || !e.holdsRecord(testClaim) {
				t.Fatalf("settle: %v, record kept %v; want the clean-up to wait for the class", err, e.holdsRecord(testClaim))
			}
			e.clock = e.clock.Add(abandonGrace)
			e.settle(testClaim)
			e.check(want{gone: true, event: ReasonVolumeCleanupAbandoned})
		})
	}
}
