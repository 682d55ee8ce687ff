package main

import "testing"

func TestGCPercent(t *testing.T) {
	for _, tt := range []struct {
		gogc      string
		set       bool
		want      int
		wantApply bool
	}{
		{"", false, defaultGCPercent, true},
		{"", true, defaultGCPercent, true}, // GOGC= is unset for the runtime too
		{"100", true, 0, false},
		{"off", true, 0, false},
	} {
		got, apply := gcPercent(tt.gogc, tt.set)
		if got != tt.want || apply != tt.wantApply {
			t.Errorf("gcPercent(%q, %v) = %d, %v; want %d, %v", tt.gogc, tt.set, got, apply, tt.want, tt.wantApply)
		}
	}
}
