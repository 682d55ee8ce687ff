package provisioner

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
)

// Outcome says what a failed CreateVolume means for the volume.
type Outcome int

const (
	// InBackground: the driver may still be making the volume; try again
	// with the same name, and keep the in-flight record.
	InBackground Outcome = iota
	// Final: the driver made no volume; report the error and retry later.
	Final
	// Reschedule: the selected node cannot hold the volume; ask the
	// scheduler for another node.
	Reschedule
	// Infeasible: the driver made no volume and refuses the request as it
	// stands (InvalidArgument, OutOfRange); the same request is refused
	// again. Final for the library; the claim then waits for an edit of
	// itself or of its classes (infeasible.go).
	Infeasible
)

func (o Outcome) String() string {
	return [...]string{"in-background", "final", "reschedule", "infeasible"}[o]
}

// Classify maps a CreateVolume error to an Outcome, as external-provisioner
// does: Canceled, DeadlineExceeded, Unavailable and Aborted (and errors that
// are not gRPC statuses at all) may leave a volume behind; ResourceExhausted
// with a selected node reschedules; every other code is final.
//
// Of the final codes, two say that the request itself is wrong, which only
// an edit of the claim or of its classes can change: InvalidArgument (CSI:
// a parameter, capability or source the plugin does not take; EP v6.4.0's
// one "infeasible" code) and OutOfRange (CSI: the capacity range is not
// allowed, and "the caller MUST fix the capacity range before retrying").
// Those are Infeasible. Not the other final codes, whose cause can pass
// without an edit: NotFound (the source may yet be made), AlreadyExists
// (the name's volume is another request's, and no edit frees the name),
// FailedPrecondition (the state of something else), PermissionDenied and
// Unauthenticated (a secret, edited elsewhere), Unimplemented (the
// driver, upgraded elsewhere), Unknown, Internal and DataLoss.
func Classify(err error, nodeSelected bool) Outcome {
	st, ok := status.FromError(err)
	if !ok {
		return InBackground
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.Aborted:
		return InBackground
	case codes.ResourceExhausted:
		if nodeSelected {
			return Reschedule
		}
	case codes.InvalidArgument, codes.OutOfRange:
		return Infeasible
	}
	return Final
}

// State is the library's provisioning state for an outcome.
func (o Outcome) State() controller.ProvisioningState {
	switch o {
	case InBackground:
		return controller.ProvisioningInBackground
	case Reschedule:
		return controller.ProvisioningReschedule
	}
	return controller.ProvisioningFinished
}

// noVolumeMade reports whether a CreateVolume's error says that the call
// made no volume and that none of the name exists: a final code (Classify,
// as EP tells final from in-background; an Infeasible one is final too),
// but AlreadyExists (a volume of the name exists, made with another
// request) and ResourceExhausted (a full backend may be full of a volume of
// the name that an earlier call is still making).
func noVolumeMade(err error) bool {
	if err == nil {
		return false
	}
	switch status.Code(err) {
	case codes.AlreadyExists, codes.ResourceExhausted:
		return false
	}
	o := Classify(err, false)
	return o == Final || o == Infeasible
}
