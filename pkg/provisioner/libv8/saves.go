package libv8

import (
	"context"
	"sync"
)

// Saves follows the library's saves of the PVs Provision returns, so that
// no volume is deleted while a save of a PV naming it may still land.
//
// With CreateProvisionedPVLimiter the library (v8) saves a PV in the
// background and, while the API server refuses it (a webhook, an outage),
// tries again for ever, with backoff; it never gives a volume up. So "no PV
// after a grace" does not mean "no PV ever". A name is followed from its
// hand-off (HandedOff) until a save of it succeeds; Fence then stops every
// later save of it: the next one is answered AlreadyExists without reaching
// the API server, which ends the library's retries, and Fence returns once
// no save of the name is under way. After Fence, the API server's word on
// whether a PV of the name exists is final for this process.
//
// It is memory only: a process that restarts has no saves left, and its
// library none either. It is safe for concurrent use.
type Saves struct {
	mu    sync.Mutex
	cond  *sync.Cond
	names map[string]*save
}

type save struct {
	calls  int  // Creates of the name under way
	fenced bool // every later Create of the name is refused
}

// NewSaves follows no name yet.
func NewSaves() *Saves {
	s := &Saves{names: map[string]*save{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// HandedOff notes that Provision returned a PV of that name to the
// library, which saves it from now on.
func (s *Saves) HandedOff(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.names[name]; !ok {
		s.names[name] = &save{}
	}
}

// Pending reports whether a save of a PV of that name may still land: it
// was handed off and no save of it has succeeded or been fenced since.
func (s *Saves) Pending(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.names[name]
	return ok && !e.fenced
}

// Followed reports whether a name is still followed: handed off, and
// neither saved nor refused since.
func (s *Saves) Followed(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.names[name]
	return ok
}

// begin is told of a Create of a PV of that name; ok false means the name
// is fenced: the Create must not reach the API server, and the name is
// followed no more.
func (s *Saves) begin(name string) (ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.names[name]
	if e == nil {
		e = &save{}
		s.names[name] = e
	}
	if e.fenced {
		if e.calls == 0 {
			delete(s.names, name)
		}
		return false
	}
	e.calls++
	return true
}

// end is told that a Create begun returned; saved says whether the PV is on
// the API server now (created, or there already). A name whose save failed
// stays followed, fenced or not: the library tries it again.
func (s *Saves) end(name string, saved bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.names[name]
	if e == nil {
		return
	}
	e.calls--
	if e.calls == 0 && saved {
		delete(s.names, name)
	}
	s.cond.Broadcast()
}

// Fence stops every later save of a PV of that name and waits until none
// is under way; err only when ctx ends first (the name stays fenced).
func (s *Saves) Fence(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.names[name]
	if e == nil {
		return nil // none handed off, or saved already
	}
	e.fenced = true
	if e.calls == 0 {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.cond.Broadcast()
	})
	defer stop()
	for e.calls > 0 && ctx.Err() == nil {
		s.cond.Wait()
	}
	return ctx.Err()
}
