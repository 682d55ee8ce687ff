package csi

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// A CreateVolume or DeleteVolume that the driver has not answered within
// the timeout is not cancelled: a backend goes on making (or deleting) the
// volume after its caller gave up, and a second call for the same volume
// while the first is at work piles onto the backend (external-provisioner
// issues 678 and 1305; vsphere-csi-driver 3024 made duplicates so). The
// caller gets DeadlineExceeded after the timeout, as before (the
// provisioner keeps the claim's in-flight record and tries again later),
// but the call goes on, for up to outliveFactor times the timeout, and the
// next call for the same volume with the same request waits for its answer
// instead of sending another. So the driver sees one call per volume at a
// time, and a volume that takes longer than the timeout is saved as soon
// as its call answers.
//
// A call with another request for a volume whose call is at work is
// refused with Aborted (the answer CSI gives for an operation pending on
// the volume), which the provisioner retries later. An answer nobody came
// for is kept for outliveFactor times the timeout, then dropped (the
// volume, if made, is the in-flight record's and the orphan sweep's).

// outliveFactor bounds how long a call may go on after its caller's
// timeout: outliveFactor x --timeout (5 minutes at the default 10s).
const outliveFactor = 30

// outliving holds, per volume (by name for CreateVolume, by ID for
// DeleteVolume), the call that outlived its caller's timeout, until a
// caller takes its answer. An answer a caller waits for is handed over
// and forgotten at once: only an answer nobody waited for is held.
type outliving[Resp any] struct {
	mu    sync.Mutex
	calls map[string]*outlivingCall[Resp]
	held  int            // answers nobody waited for, kept for a later caller
	work  sync.WaitGroup // the calls at work in the driver
}

type outlivingCall[Resp any] struct {
	req      proto.Message
	done     chan struct{} // closed when the driver answered
	resp     Resp
	err      error
	waiting  int  // callers waiting for the answer; under outliving.mu
	answered bool // done is closed; under outliving.mu
	held     bool // counted in outliving.held; under outliving.mu
}

// call makes call(req) for key, or joins the one at work for key with an
// equal request, and waits for its answer up to timeout. Past the
// timeout, the call goes on (up to outliveFactor x timeout) and the
// caller gets DeadlineExceeded.
func (o *outliving[Resp]) call(ctx context.Context, key string, req proto.Message, timeout time.Duration,
	call func(context.Context) (Resp, error)) (Resp, error) {
	var zero Resp
	if err := ctx.Err(); err != nil {
		return zero, status.FromContextError(err).Err()
	}
	o.mu.Lock()
	if o.calls == nil {
		o.calls = map[string]*outlivingCall[Resp]{}
	}
	c := o.calls[key]
	if c != nil && !proto.Equal(c.req, req) {
		select {
		case <-c.done:
			c = nil // an answer to another request: not ours, and nobody's now
		default:
			o.mu.Unlock()
			return zero, status.Errorf(codes.Aborted, "an earlier call for %s, with another request, is still at work in the driver", key)
		}
	}
	if c == nil {
		c = &outlivingCall[Resp]{req: req, done: make(chan struct{})}
		o.calls[key] = c
		// Not cancelled with the caller: the driver's work goes on, and
		// so does the call. The caller's values (its logger) stay.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outliveFactor*timeout)
		o.work.Add(1)
		go func() {
			defer o.work.Done()
			defer cancel()
			c.resp, c.err = call(cctx)
			close(c.done)
			o.mu.Lock()
			c.answered = true
			o.holdUnclaimed(key, c, timeout)
			o.mu.Unlock()
		}()
	}
	c.waiting++
	o.mu.Unlock()

	wait := time.NewTimer(timeout)
	defer wait.Stop()
	select {
	case <-c.done:
		o.mu.Lock()
		c.waiting--
		o.forget(key, c)
		o.mu.Unlock()
		return c.resp, c.err
	case <-wait.C:
		o.leave(key, c, timeout)
		return zero, status.Errorf(codes.DeadlineExceeded, "the driver has not answered within %s; the call goes on, and the next one for %s waits for its answer", timeout, key)
	case <-ctx.Done():
		o.leave(key, c, timeout)
		return zero, status.FromContextError(ctx.Err()).Err()
	}
}

// leave is a caller's who stops waiting for c's answer without taking it.
func (o *outliving[Resp]) leave(key string, c *outlivingCall[Resp], timeout time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c.waiting--
	if c.answered {
		o.holdUnclaimed(key, c, timeout)
	}
}

// holdUnclaimed keeps c's answer, once it has come and if no caller waits
// for it, for a caller that comes within outliveFactor x timeout, then
// forgets it. o.mu is held.
func (o *outliving[Resp]) holdUnclaimed(key string, c *outlivingCall[Resp], timeout time.Duration) {
	if c.waiting > 0 || c.held || o.calls[key] != c {
		return
	}
	c.held = true
	o.held++
	time.AfterFunc(outliveFactor*timeout, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.forget(key, c)
	})
}

// forget drops c, if it is still key's call. o.mu is held.
func (o *outliving[Resp]) forget(key string, c *outlivingCall[Resp]) {
	if o.calls[key] == c {
		delete(o.calls, key)
	}
	if c.held {
		c.held = false
		o.held--
	}
}
