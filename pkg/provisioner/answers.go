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
)

func (o Outcome) String() string {
	return [...]string{"in-background", "final", "reschedule"}[o]
}

// Classify maps a CreateVolume error to an Outcome, as external-provisioner
// does: Canceled, DeadlineExceeded, Unavailable and Aborted (and errors that
// are not gRPC statuses at all) may leave a volume behind; ResourceExhausted
// with a selected node reschedules; every other code is final.
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
// as EP tells final from in-background), but AlreadyExists (a volume of the
// name exists, made with another request) and ResourceExhausted (a full
// backend may be full of a volume of the name that an earlier call is
// still making).
func noVolumeMade(err error) bool {
	if err == nil {
		return false
	}
	switch status.Code(err) {
	case codes.AlreadyExists, codes.ResourceExhausted:
		return false
	}
	return Classify(err, false) == Final
}
