package provisioner

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
)

// statusErr carries any status, codes.OK included (status.Error(codes.OK,
// ...) is nil, so a driver's error can carry OK only this way).
type statusErr struct{ st *status.Status }

func (e statusErr) Error() string              { return e.st.Message() }
func (e statusErr) GRPCStatus() *status.Status { return e.st }

func TestClassify(t *testing.T) {
	// Without a selected node, with one.
	want := map[codes.Code][2]Outcome{
		codes.OK:                 {Final, Final},
		codes.Canceled:           {InBackground, InBackground},
		codes.Unknown:            {Final, Final},
		codes.InvalidArgument:    {Infeasible, Infeasible},
		codes.DeadlineExceeded:   {InBackground, InBackground},
		codes.NotFound:           {Final, Final},
		codes.AlreadyExists:      {Final, Final},
		codes.PermissionDenied:   {Final, Final},
		codes.ResourceExhausted:  {Final, Reschedule},
		codes.FailedPrecondition: {Final, Final},
		codes.Aborted:            {InBackground, InBackground},
		codes.OutOfRange:         {Infeasible, Infeasible},
		codes.Unimplemented:      {Final, Final},
		codes.Internal:           {Final, Final},
		codes.Unavailable:        {InBackground, InBackground},
		codes.DataLoss:           {Final, Final},
		codes.Unauthenticated:    {Final, Final},
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		w, ok := want[c]
		if !ok {
			t.Fatalf("no expectation for %s", c)
		}
		errs := map[string]error{
			"status":         statusErr{status.New(c, "boom")},
			"wrapped status": fmt.Errorf("CreateVolume: %w", statusErr{status.New(c, "boom")}),
		}
		if c != codes.OK {
			errs["status.Error"] = status.Error(c, "boom")
			errs["wrapped status.Error"] = fmt.Errorf("CreateVolume pvc-1: %w", status.Error(c, "boom"))
			errs["twice wrapped"] = fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", status.Error(c, "boom")))
		}
		for kind, err := range errs {
			for i, node := range []bool{false, true} {
				if got := Classify(err, node); got != w[i] {
					t.Errorf("Classify(%s %s, node=%v) = %s, want %s", kind, c, node, got, w[i])
				}
			}
		}
	}
	if len(want) != 17 {
		t.Errorf("%d codes, want the 17 of codes.OK..codes.Unauthenticated", len(want))
	}
}

func TestClassifyOtherErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Outcome
	}{
		// Not a gRPC status: the call may not have reached the driver,
		// or its answer was lost; the volume may exist.
		{name: "plain error", err: errors.New("connection reset"), want: InBackground},
		{name: "context canceled", err: context.Canceled, want: InBackground},
		{name: "context deadline", err: context.DeadlineExceeded, want: InBackground},
		// The status is flattened into the message: no longer a status.
		{name: "status formatted with %v", err: fmt.Errorf("CreateVolume: %v", status.Error(codes.InvalidArgument, "bad")), want: InBackground},
		// A nil status maps to OK, which grpc turns into Unknown, ok=false.
		{name: "nil GRPCStatus", err: statusErr{nil}, want: InBackground},
		// status.FromError looks through wrapping (errors.As).
		{name: "wrapped final", err: fmt.Errorf("x: %w", status.Error(codes.Internal, "bad")), want: Final},
		{name: "wrapped infeasible", err: fmt.Errorf("x: %w", status.Error(codes.InvalidArgument, "bad")), want: Infeasible},
		{name: "joined with a status", err: errors.Join(errors.New("a"), status.Error(codes.NotFound, "gone")), want: Final},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, node := range []bool{false, true} {
				if got := Classify(tt.err, node); got != tt.want {
					t.Errorf("Classify(%v, node=%v) = %s, want %s", tt.err, node, got, tt.want)
				}
			}
		})
	}
}

// What status.FromError does with a wrapped status: the code is kept, the
// message becomes the whole chain's. Classify relies on the code only.
func TestFromErrorWrapped(t *testing.T) {
	st, ok := status.FromError(fmt.Errorf("CreateVolume pvc-1: %w", status.Error(codes.ResourceExhausted, "full")))
	if !ok || st.Code() != codes.ResourceExhausted || st.Message() != "CreateVolume pvc-1: rpc error: code = ResourceExhausted desc = full" {
		t.Errorf("FromError = %v, %v", st, ok)
	}
}

func TestOutcomeState(t *testing.T) {
	tests := []struct {
		o    Outcome
		str  string
		want controller.ProvisioningState
	}{
		{InBackground, "in-background", controller.ProvisioningInBackground},
		{Final, "final", controller.ProvisioningFinished},
		{Reschedule, "reschedule", controller.ProvisioningReschedule},
		{Infeasible, "infeasible", controller.ProvisioningFinished},
	}
	for _, tt := range tests {
		if got := tt.o.State(); got != tt.want {
			t.Errorf("%s.State() = %q, want %q", tt.o, got, tt.want)
		}
		if got := tt.o.String(); got != tt.str {
			t.Errorf("String() = %q, want %q", got, tt.str)
		}
	}
}

// TestNoVolumeMadeKeptForInfeasible: the Infeasible outcome leaves the
// no-leak bookkeeping as it was: noVolumeMade holds for exactly the final
// codes but AlreadyExists and ResourceExhausted, as before there was an
// Infeasible outcome.
func TestNoVolumeMadeKeptForInfeasible(t *testing.T) {
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		err := status.Error(c, "boom")
		var want bool
		switch c {
		case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.Aborted, codes.AlreadyExists, codes.ResourceExhausted:
		default:
			want = true
		}
		if got := noVolumeMade(err); got != want {
			t.Errorf("noVolumeMade(%s) = %v, want %v", c, got, want)
		}
		if o := Classify(err, false); o == Infeasible && !noVolumeMade(err) {
			t.Errorf("%s is infeasible, but may have made a volume", c)
		}
	}
}
