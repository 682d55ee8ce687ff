package csi

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestOutlivingCall: the call outlives a caller that gave up (its
// context cancelled), with a deadline of outliveFactor x timeout; its
// answer waits for the next caller, and is dropped when nobody comes for
// it within that time.
func TestOutlivingCall(t *testing.T) {
	var o outliving[*csi.DeleteVolumeResponse]
	const timeout = time.Millisecond
	release := make(chan struct{})
	deadline := make(chan time.Duration, 1)
	driver := func(ctx context.Context) (*csi.DeleteVolumeResponse, error) {
		d, _ := ctx.Deadline()
		deadline <- time.Until(d)
		<-release
		return &csi.DeleteVolumeResponse{}, ctx.Err()
	}
	req := &csi.DeleteVolumeRequest{VolumeId: "vol-1"}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := o.call(ctx, "vol-1", req, time.Hour, driver); status.Code(err) != codes.Canceled {
		t.Fatalf("a caller that gave up before the call: %v, want Canceled", err)
	}
	if _, err := o.call(t.Context(), "vol-1", req, timeout, driver); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("first call: %v, want DeadlineExceeded", err)
	}
	if d := <-deadline; d > outliveFactor*timeout || d <= 0 {
		t.Errorf("the driver's call has %v left, want at most %v", d, outliveFactor*timeout)
	}
	close(release)
	// Its answer comes (nil error: the driver answered within its
	// deadline), is kept, then dropped.
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.calls) == 0 && o.held == 0, nil
	})
	if err != nil {
		t.Fatalf("the answer nobody came for was not dropped: %v", err)
	}
}

// TestOutlivingCallHoldsNoAnswerItHandedOver: an answer its caller waited
// for is handed over and not held after, whichever of the driver's
// goroutine and the woken caller takes the lock first.
func TestOutlivingCallHoldsNoAnswerItHandedOver(t *testing.T) {
	var o outliving[*csi.CreateVolumeResponse]
	driver := func(context.Context) (*csi.CreateVolumeResponse, error) {
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol"}}, nil
	}
	for i := range 200 {
		key := fmt.Sprintf("pvc-%d", i%3)
		resp, err := o.call(t.Context(), key, &csi.CreateVolumeRequest{Name: key}, time.Hour, driver)
		if err != nil || resp.GetVolume().GetVolumeId() != "vol" {
			t.Fatalf("call %d: %v, %v", i, resp, err)
		}
	}
	o.work.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held != 0 || len(o.calls) != 0 {
		t.Errorf("after 200 answers handed over: %d held, %d calls kept, want none", o.held, len(o.calls))
	}
}
