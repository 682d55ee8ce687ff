package libv8

import (
	"context"
	"testing"
	"time"
)

// TestSavesFollowNames: a name is followed from its hand-off until a save
// of it lands, or, once fenced, until the library's next save of it is
// refused; a failed save leaves it followed.
func TestSavesFollowNames(t *testing.T) {
	ctx := context.Background()
	s := NewSaves()
	if s.Pending("a") || s.Followed("a") {
		t.Fatal("a name never handed off is followed")
	}
	if err := s.Fence(ctx, "a"); err != nil || s.Followed("a") {
		t.Fatalf("fencing a name never handed off: %v, followed %v; want nothing", err, s.Followed("a"))
	}
	s.HandedOff("a")
	if !s.Pending("a") {
		t.Fatal("a name handed off is not pending")
	}
	if !s.begin("a") {
		t.Fatal("the first save was refused")
	}
	s.end("a", false)
	if !s.Pending("a") {
		t.Fatal("a refused save is not pending any more")
	}
	if !s.begin("a") {
		t.Fatal("a retry was refused before any fence")
	}
	s.end("a", true)
	if s.Followed("a") || s.Pending("a") {
		t.Fatal("a saved name is still followed")
	}

	s.HandedOff("b")
	s.HandedOff("b")
	if err := s.Fence(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if s.Pending("b") || !s.Followed("b") {
		t.Fatalf("fenced: pending %v, followed %v; want not pending, followed until the next save", s.Pending("b"), s.Followed("b"))
	}
	if s.begin("b") {
		t.Fatal("a save of a fenced name went through")
	}
	if s.Followed("b") {
		t.Fatal("a fenced name is followed after its save was refused")
	}
	if !s.begin("b") {
		t.Fatal("a new save of the name after the fence's refusal was refused")
	}
	s.end("b", true)
}

// TestSavesFenceWaitsForASaveUnderWay: Fence returns only once the save
// under way has returned; a failed one leaves the name fenced, so the
// library's retry is refused; an ended context ends the wait.
func TestSavesFenceWaitsForASaveUnderWay(t *testing.T) {
	s := NewSaves()
	s.HandedOff("a")
	if !s.begin("a") {
		t.Fatal("the save was refused")
	}
	done := make(chan error)
	go func() { done <- s.Fence(context.Background(), "a") }()
	select {
	case err := <-done:
		t.Fatalf("Fence returned (%v) while a save was under way", err)
	case <-time.After(20 * time.Millisecond):
	}
	s.end("a", false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s.begin("a") {
		t.Fatal("the library's retry after the fence went through")
	}

	s.HandedOff("c")
	s.begin("c")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- s.Fence(ctx, "c") }()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Fence returned no error when its context ended first")
	}
	if s.Pending("c") {
		t.Fatal("a name whose Fence ended early is not fenced")
	}
}
