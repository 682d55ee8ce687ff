package claimlock

import "testing"

func TestTryLockWhileHeld(t *testing.T) {
	var s Set
	unlock := s.Lock("a")
	if _, ok := s.TryLock("a"); ok {
		t.Fatal("TryLock took a held key")
	}
	other, ok := s.TryLock("b")
	if !ok {
		t.Fatal("TryLock refused a free key")
	}
	other()
	unlock()
	again, ok := s.TryLock("a")
	if !ok {
		t.Fatal("TryLock refused a released key")
	}
	again()
	if len(s.locks) != 0 {
		t.Errorf("%d keys kept after every lock was released, want 0", len(s.locks))
	}
}
