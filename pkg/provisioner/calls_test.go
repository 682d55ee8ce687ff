package provisioner

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
)

// TestCreateAnswers: what createAnswers concludes from a claim's history in
// one process ("record": it wrote the record on a claim that held none;
// "done": the record went through it; an error: a CreateVolume's answer;
// "ok": a CreateVolume that made the volume).
func TestCreateAnswers(t *testing.T) {
	final := status.Error(codes.InvalidArgument, "block volumes are not supported")
	ok := errors.New("ok") // stands for a nil answer
	tests := []struct {
		name    string
		history []any
		want    bool
	}{
		{"record written, no call yet", []any{"record"}, true},
		{"record written, one final answer", []any{"record", final}, true},
		{"record written, final answers on every retry", []any{"record", final, status.Error(codes.NotFound, "no such source"), final}, true},
		{"record written, a timeout then a final answer: the first may go on making it", []any{"record", timeoutErr, final}, false},
		{"record written, a final answer then a timeout", []any{"record", final, timeoutErr}, false},
		{"record written, Unavailable", []any{"record", status.Error(codes.Unavailable, "restarting")}, false},
		{"record written, Aborted", []any{"record", status.Error(codes.Aborted, "in progress")}, false},
		{"record written, Canceled", []any{"record", status.Error(codes.Canceled, "cancelled")}, false},
		{"record written, ResourceExhausted", []any{"record", status.Error(codes.ResourceExhausted, "full")}, false},
		{"record written, AlreadyExists: a volume of the name exists", []any{"record", status.Error(codes.AlreadyExists, "other parameters")}, false},
		{"record written, an error that is not gRPC's", []any{"record", errors.New("connection reset")}, false},
		{"record written, the volume made", []any{"record", ok}, false},
		{"a record this process did not write (a restart, a forged one), a final answer", []any{final}, false},
		{"a call before the record was written here, then a record from none: the call is not forgotten", []any{timeoutErr, "record", final}, false},
		{"a timeout, the record stripped and written again: still unknown", []any{"record", timeoutErr, "record", final}, false},
		{"the record went through this process, then a new record and a final answer", []any{"record", timeoutErr, "done", "record", final}, true},
		{"nothing known", nil, false},
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const uid = types.UID(testUID)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newCreateAnswers()
			for _, h := range tt.history {
				switch h {
				case "record":
					a.recorded(uid, now)
				case "done":
					a.forget(uid)
				case ok:
					a.answered(uid, nil, now)
				default:
					a.answered(uid, h.(error), now)
				}
			}
			if got := a.noVolume(uid); got != tt.want {
				t.Errorf("noVolume = %v, want %v", got, tt.want)
			}
			if a.noVolume("another-claim") {
				t.Error("another claim's answers are known")
			}
		})
	}
}

// TestCreateAnswersForgetAfterAnHour: an entry not touched for answersKept
// goes (pruned as others come), and then nothing is known.
func TestCreateAnswersForgetAfterAnHour(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	a := newCreateAnswers()
	a.recorded("old", now)
	a.recorded("new", now.Add(answersKept+time.Minute))
	if a.noVolume("old") || !a.noVolume("new") {
		t.Errorf("old known %v, new known %v; want only the new one", a.noVolume("old"), a.noVolume("new"))
	}
}
