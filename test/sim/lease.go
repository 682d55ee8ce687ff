package sim

import (
	"context"
	"fmt"
	"slices"
)

// A lost lease (centralised mode). The process's work stops as
// production's does: its work function, made by server.Work.Run as
// cmd/provisioner makes it, is run with its context ended, and the lease is
// handed back, and taken by another replica, only once that function has
// returned. A worker may be inside a call when the lease goes: the sim
// picks one ready key of the old leader's queues as that call, run in a
// goroutine started with Work.Go and counted in Work.Calls, and released by
// the scheduler at a later step (the main loop waits for it meanwhile, so
// the world is never touched by two goroutines at once). The invariant: the
// new leader never runs while the old leader's call is under way.
type handover struct {
	old      *provProc
	q        *queue
	key      string
	result   string
	gate     chan struct{} // closed to let the call run
	finished chan struct{} // closed when the call is over
	done     chan struct{} // closed when the work function returned: the lease is handed back
	killed   bool          // the old process crashed: the call never runs
	ran      bool
	started  bool // the new leader runs
}

func (w *World) loseLease() string {
	old := w.provs[0]
	h := &handover{old: old, gate: make(chan struct{}), finished: make(chan struct{}), done: make(chan struct{})}
	var items []*queue
	for _, q := range old.procQueues() {
		q.promote(w.now)
		if len(q.readyKeys()) > 0 {
			items = append(items, q)
		}
	}
	if len(items) > 0 {
		h.q = pick(w, items)
		h.key = pick(w, h.q.readyKeys())
		h.q.take(h.key)
		old.work.Calls.Enter() // inside its call when the lease goes
	}
	run := old.work.Run(func(context.Context) error {
		if h.q != nil {
			old.work.Go(func(context.Context) {
				defer close(h.finished)
				defer old.work.Calls.Leave()
				<-h.gate
				if !h.killed {
					h.result = w.work(h.q, h.key)
				}
			})
		}
		return nil
	})
	ctx, cancel := context.WithCancel(w.ctx)
	go func() {
		_ = run(ctx)
		close(h.done)
	}()
	cancel()
	w.handover = h
	if h.q == nil {
		<-h.done
		w.takeOver()
		return "lease lost with no call under way: another replica takes it"
	}
	return fmt.Sprintf("lease lost while the %s works on %s %s", old.name, h.q.name, h.key)
}

// takeOver starts the new leader once the lease is handed back.
func (w *World) takeOver() {
	h := w.handover
	h.started = true
	w.startProvisioner(0)
	w.tracef("  the lease is handed back: another replica leads")
	if h.q == nil || h.ran {
		w.handover = nil
	}
}

// checkHandover runs before every step: the lease is taken over as soon
// as the old leader's work function has returned.
func (w *World) checkHandover() {
	h := w.handover
	if h == nil || h.started {
		return
	}
	select {
	case <-h.done:
		w.takeOver()
	default:
	}
}

// finishCall lets the old leader's call run, in its goroutine.
func (w *World) finishCall() string {
	h := w.handover
	h.ran = true
	if h.started {
		w.violate("the lease was handed back while the old leader's %s call was under way: two provisioners ran at once", h.q.name)
	}
	close(h.gate)
	<-h.finished
	<-h.done
	msg := "old leader's call: " + h.result
	if !h.started {
		w.takeOver()
	} else {
		w.handover = nil
	}
	return msg
}

// killHandover ends a handover whose old process crashes: its call never
// runs.
func (w *World) killHandover() {
	h := w.handover
	if h == nil {
		return
	}
	w.handover = nil
	if h.q != nil && !h.ran {
		h.killed = true
		close(h.gate)
		<-h.finished
	}
	<-h.done
}

// busyOld reports whether q belongs to an old leader that no longer takes
// work (its lease is lost, its call not over).
func (w *World) busyOld(q *queue) bool {
	h := w.handover
	if h == nil || h.started {
		return false
	}
	return slices.Contains(h.old.procQueues(), q)
}

// procs are the provisioner processes whose queues may be worked: the
// running ones, and an old leader finishing its call.
func (w *World) procs() []*provProc {
	if h := w.handover; h != nil && !slices.Contains(w.provs, h.old) {
		return append(slices.Clone(w.provs), h.old)
	}
	return w.provs
}

// procQueues are a provisioner process's work queues.
func (p *provProc) procQueues() []*queue {
	return []*queue{p.lib.claimQ, p.lib.volumeQ, p.lib.saveQ, p.ifQ, p.cloneQ, p.snapQ, p.staticQ}
}
